"""Which socket of a namespace took a probe's packet that no rule rewrote: the kernel is asked with `ss`.

A packet for one of a node's own addresses that no rule DNATs, rejects or drops is delivered to whatever socket
the node has on that port: kube-proxy up to 1.23 holds every NodePort that way (lab/render/kubeproxy/ports.py),
and the socket never reads. The probe's answer then is silence (a UDP datagram queued unread) or a handshake
with nobody behind it (a TCP connection waiting in the listener's queue); `ss` shows the socket and what it has
queued (Recv-Q), and render says whether it is kube-proxy's.
"""

from __future__ import annotations

import struct

from lab.describe.topology import Topology
from lab.install.tools import run_command
from lab.probe.capture import Frame
from lab.render.dataplane import node_held_ports

_PROTOCOLS = {6: "TCP", 17: "UDP"}


def destination(frame: Frame) -> tuple[str, str, int] | None:
    """(protocol, address, port) a captured TCP or UDP packet (IPv4 or IPv6) is for; None for any other."""
    packet = frame.packet
    if packet is None or packet.protocol not in _PROTOCOLS or len(frame.data) < packet.offset + 4:
        return None
    (port,) = struct.unpack_from("!H", frame.data, packet.offset + 2)
    return _PROTOCOLS[packet.protocol], packet.dst, port


def taken_by(netns: str, protocol: str, address: str, port: int) -> str:
    """The `ss` line (state, Recv-Q, Send-Q, local address) of the socket in netns that takes `protocol` packets
    for address:port, listening or bound; "" when none does."""
    listing = run_command(netns, ("ss", "-Hln" + ("t" if protocol == "TCP" else "u"), f"sport = :{port}"))
    # ss writes an IPv6 address in brackets, a wildcard of one family as 0.0.0.0 or [::], of both as *.
    wildcard = "::" if ":" in address else "0.0.0.0"
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].rpartition(":")[0].strip("[]") in (wildcard, "*", address):
            return " ".join(fields[:4])
    return ""


def silent_taker(topo: Topology, actor: str, netns: str, protocol: str, address: str, port: int) -> str:
    """Why a packet for address:port delivered on `actor` got no answer, when a socket there took it ("" when
    none did)."""
    line = taken_by(netns, protocol, address, port)
    if not line:
        return ""
    said = f"{actor}'s own socket took it and never answers (ss: {line})"
    held = next((p for p in node_held_ports(topo, actor) if p.covers(protocol, address, port)), None)
    if held is None:
        return said
    return (
        f"{said}: kube-proxy {topo.cluster.kube_version} holds {held} open, as its port opener did up to 1.23 "
        "(removed by kubernetes#108496), and no rule rewrote the packet before it reached that socket"
    )
