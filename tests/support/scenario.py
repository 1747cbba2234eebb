"""Scenario files in tests: a small valid one (BASE) to vary, written to a temporary directory and loaded, or
the ScenarioError it raises; a stand-in probe session; hand-made captured frames."""

from __future__ import annotations

import socket
import struct
import textwrap
from pathlib import Path

import pytest

from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario
from lab.probe.capture import Frame
from lab.probe.observation import Observation

# Two nodes and a client host on the underlay, for scenario texts to start from.
NODES = """\
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
  - {name: node2, ip: 192.168.56.12, podCIDR: 10.244.2.0/24}
externalHosts:
  - {name: client, ip: 192.168.56.100}
"""
# A NodePort Service "web" selecting app=web, and the start of a probe to it from the client through node2.
SERVICE_AND_PROBE = """\
  - kind: Service
    metadata: {name: web}
    spec:
      type: NodePort
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: http}]
probes:
  - name: p
    from: client
    to: {service: web, port: http, via: nodePort, node: node2}
"""
BASE = (
    """\
name: t
cluster: {clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/16, underlay: 192.168.56.0/24}
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24, labels: {role: web}}
  - {name: node2, ip: 192.168.56.12, podCIDR: 10.244.2.0/24}
externalHosts:
  - {name: client, ip: 192.168.56.100}
workload:
  - kind: Deployment
    metadata: {name: web}
    spec:
      replicas: 2
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          nodeSelector: {role: web}
          containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]
"""
    + SERVICE_AND_PROBE
    + "    expect: {outcome: delivered, source: node2}\n"
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def error_for(tmp_path: Path, text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    return info.value


class ScriptedSession:
    """Stands in for a ProbeSession: hands out the given observations, one per connection."""

    def __init__(self, observations: list[Observation]) -> None:
        self.observations = list(observations)

    def run(self, probe, running) -> Observation:
        return self.observations.pop(0)


def frame(where: str, outgoing: bool, src: str, dst: str, proto: int, l4: bytes) -> Frame:
    actor, ifname = where.split("/")
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0, 64, proto, 0, *map(socket.inet_aton, (src, dst)))
    return Frame(actor, ifname, outgoing, 0.0, bytes(12) + b"\x08\x00" + ip + l4)


def frame6(where: str, outgoing: bool, src: str, dst: str, proto: int, l4: bytes) -> Frame:
    """An IPv6 frame (no extension headers) carrying `l4` as next header `proto`."""
    actor, ifname = where.split("/")
    addresses = [socket.inet_pton(socket.AF_INET6, a) for a in (src, dst)]
    ip = struct.pack("!IHBB16s16s", 6 << 28, len(l4), proto, 64, *addresses)
    return Frame(actor, ifname, outgoing, 0.0, bytes(12) + b"\x86\xdd" + ip + l4)


def tcp(flags: int) -> bytes:
    return struct.pack("!HHIIBBHHH", 80, 40000, 0, 0, 0x50, flags, 0, 0, 0)
