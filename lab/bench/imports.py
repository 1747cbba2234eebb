"""`lab bench --import NODES,PODS,SERVICES`: a generated kubectl List of a large cluster, and the time and peak
memory `lab import` takes to read it. The List is what `kubectl get nodes,pods,services,endpointslices -A -o yaml`
prints for such a cluster (Nodes with an InternalIP and a podCIDR, running Pods with their addresses, ClusterIP
Services and their EndpointSlices), beside kube-proxy's ConfigMap; `import_list` writes both, so anyone can run
`lab import` on them.

The cluster: NODES nodes, node n at 172.16.0.0/16 with podCIDR 100.64.0.0/10's n-th /24; PODS pods spread evenly,
pod p on node p mod NODES; SERVICES Services, pod p behind Service p mod SERVICES (its label app=svc-<s>), each
Service's ClusterIP in 10.96.0.0/12 and one EndpointSlice listing its pods.
"""

from __future__ import annotations

import ipaddress
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lab.describe.digits import is_ascii_number

_PODS = ipaddress.ip_network("100.64.0.0/10")
_NODES = ipaddress.ip_network("172.16.0.0/16")
_SERVICES = ipaddress.ip_network("10.96.0.0/12")
_PROXY_CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-proxy, namespace: kube-system}
data:
  config.conf: |-
    apiVersion: kubeproxy.config.k8s.io/v1alpha1
    kind: KubeProxyConfiguration
    mode: iptables
    clusterCIDR: 100.64.0.0/10
"""


def parse_import_size(text: str) -> tuple[int, int, int]:
    """`1000,30000,1000` → (1000, 30000, 1000); ValueError naming what is wrong."""
    parts = text.split(",")
    if len(parts) != 3 or not all(is_ascii_number(p) and int(p) >= 1 for p in parts):
        raise ValueError(f"expected NODES,PODS,SERVICES (each at least 1), e.g. 1000,30000,1000, got {text!r}")
    nodes, pods, services = (int(p) for p in parts)
    if nodes > 16_000 or pods > nodes * 250:
        raise ValueError(f"{text}: at most 16000 nodes (a /24 podCIDR each in a /10) and 250 pods per node")
    return nodes, pods, services


def _node(n: int) -> str:
    cidr = f"{_PODS.network_address + 256 * n}/24"
    return (
        f"- apiVersion: v1\n  kind: Node\n  metadata:\n    name: node{n}\n"
        f"    labels: {{kubernetes.io/hostname: node{n}, kubernetes.io/os: linux}}\n"
        f"  spec:\n    podCIDR: {cidr}\n    podCIDRs: [{cidr}]\n"
        f"  status:\n    addresses:\n    - {{type: InternalIP, address: {_NODES.network_address + 2 + n}}}\n"
        f"    - {{type: Hostname, address: node{n}}}\n"
        "    conditions:\n    - {type: Ready, status: 'True'}\n"
    )


def _pod_ip(p: int, nodes: int) -> ipaddress.IPv4Address:
    return _PODS.network_address + 256 * (p % nodes) + 2 + p // nodes  # type: ignore[return-value]


def _pod(p: int, nodes: int, services: int) -> str:
    ip = _pod_ip(p, nodes)
    return (
        f"- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: svc-{p % services}-{p}\n    namespace: default\n"
        f"    labels: {{app: svc-{p % services}}}\n"
        f"    ownerReferences:\n    - {{apiVersion: apps/v1, kind: ReplicaSet, name: svc-{p % services}-rs, "
        "controller: true}\n"
        f"  spec:\n    nodeName: node{p % nodes}\n"
        "    containers:\n    - name: web\n      ports:\n      - {containerPort: 8080, protocol: TCP}\n"
        f"  status:\n    phase: Running\n    podIP: {ip}\n    podIPs:\n    - {{ip: {ip}}}\n"
        "    conditions:\n    - {type: Ready, status: 'True'}\n"
    )


def _service(s: int) -> str:
    ip = _SERVICES.network_address + 10 + s
    return (
        f"- apiVersion: v1\n  kind: Service\n  metadata:\n    name: svc-{s}\n    namespace: default\n"
        f"  spec:\n    type: ClusterIP\n    clusterIP: {ip}\n    clusterIPs: [{ip}]\n"
        f"    selector: {{app: svc-{s}}}\n"
        "    ports:\n    - {name: http, port: 80, protocol: TCP, targetPort: 8080}\n"
    )


def _slice(s: int, nodes: int, pods: int, services: int) -> str:
    lines = [
        f"- apiVersion: discovery.k8s.io/v1\n  kind: EndpointSlice\n  addressType: IPv4\n  metadata:\n"
        f"    name: svc-{s}-abcde\n    namespace: default\n    labels: {{kubernetes.io/service-name: svc-{s}}}\n"
        "  ports:\n  - {name: http, port: 8080, protocol: TCP}\n  endpoints:\n"
    ]
    for p in range(s, pods, services):
        lines.append(
            f"  - addresses: [{_pod_ip(p, nodes)}]\n"
            "    conditions: {ready: true, serving: true, terminating: false}\n"
            f"    nodeName: node{p % nodes}\n"
            f"    targetRef: {{kind: Pod, name: svc-{s}-{p}, namespace: default}}\n"
        )
    if len(lines) == 1:
        lines[0] = lines[0].replace("  endpoints:\n", "  endpoints: []\n")
    return "".join(lines)


def cluster_list(nodes: int, pods: int, services: int) -> str:
    """The kubectl List's YAML."""
    parts = ["apiVersion: v1\nkind: List\nmetadata: {resourceVersion: ''}\nitems:\n"]
    parts += [_node(n) for n in range(nodes)]
    parts += [_pod(p, nodes, services) for p in range(pods)]
    parts += [_service(s) for s in range(services)]
    parts += [_slice(s, nodes, pods, services) for s in range(services)]
    return "".join(parts)


def import_list(nodes: int, pods: int, services: int, directory: Path) -> list[Path]:
    """Write the List and kube-proxy's ConfigMap into `directory`; their paths, as `lab import` takes them."""
    dump = directory / f"cluster-{nodes}-{pods}-{services}.yaml"
    dump.write_text(cluster_list(nodes, pods, services))
    config = directory / "kube-proxy.yaml"
    config.write_text(_PROXY_CONFIG)
    return [dump, config]


def _timed_import(files: list[Path], extra: list[str]) -> tuple[float, float, float, str]:
    """Wall and CPU seconds, peak resident MB of a `lab import` child, and its last error line ('' when it
    succeeded). The CPU seconds are what a loaded machine changes least."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "from lab.start import main; main()", "import", *map(str, files), *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    # ru_maxrss of children is the largest of any child so far: a smaller child after a larger one reads as the
    # larger, so sizes are timed smallest first.
    said = "" if done.returncode == 0 else (done.stderr.strip().splitlines() or ["(no message)"])[-1]
    cpu_seconds = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
    return seconds, cpu_seconds, used.ru_maxrss / 1024, said


def run_import_bench(sizes: list[tuple[int, int, int]], console: Console, directory: Path) -> int:
    table = Table(title="lab bench --import: lab import of a generated kubectl List")
    for column in ("nodes", "pods", "services", "List MB", "import s", "CPU s", "peak MB", "load average", "outcome"):
        table.add_column(column, justify="right")
    for nodes, pods, services in sorted(sizes, key=lambda size: size[0] + size[1]):
        files = import_list(nodes, pods, services, directory)
        megabytes = files[0].stat().st_size / 1e6
        load = f"{os.getloadavg()[0]:.1f}"
        scenario = directory / f"scenario-{nodes}-{pods}-{services}.yaml"
        seconds, cpu, peak, said = _timed_import(files, ["--kube-version", "1.31", "-o", str(scenario)])
        sizes_said = (str(nodes), str(pods), str(services), f"{megabytes:.1f}")
        table.add_row(*sizes_said, f"{seconds:.1f}", f"{cpu:.1f}", f"{peak:.0f}", load, said or "imported")
        console.print(f"[dim]{time.strftime('%H:%M:%S')} {nodes},{pods},{services} done[/dim]")
    table.caption = (
        "import s: the whole `lab import` (reading, checking, writing and validating the scenario), wall time; CPU s: "
        "its own (user and system); peak MB: its "
        f"largest resident size. {os.cpu_count()} cores; load average when each size started. A List over the lab's "
        "node or pod limits is refused (outcome), after the whole import has read it"
    )
    console.print(table)
    return 0
