"""`lab bench --scale`: how install time and first-packet latency grow with the number of Services, per mode.

KEP-3866 motivates kube-proxy's nftables mode by exactly this: iptables walks KUBE-SERVICES rule by rule,
nftables looks the destination up in a verdict map. Each run builds one node namespace (the replay
environment: a client pod on cni0, every endpoint behind the uplink), installs N ClusterIP Services with one
endpoint each, and times (a) loading the rendered rules with the real tool and (b) new connections to the
last Service, each a fresh conntrack entry, so every one walks the rules.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from lab.install import ip_batch, ipset_restore_all, iptables_restore, ipvsadm_restore, nft_apply
from lab.kubeproxy.iptables import render_iptables
from lab.kubeproxy.ipvs import render_ipvs
from lab.kubeproxy.nftables import render_nftables
from lab.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from lab.probe.client import send
from lab.probe.echo import EchoServers, Listener
from lab.replay.env import Setup, build

NODE_IP = "192.168.0.2"
POD_CIDR = "10.0.1.0/24"
CLIENT = "10.0.1.7"
CONFIG = ProxyConfig(cluster_cidr="10.0.0.0/8")


def services(count: int) -> list[ServicePort]:
    def address(base: str, i: int) -> str:
        return f"{base}.{i // 250}.{i % 250 + 1}"

    return [
        ServicePort(
            "bench",
            f"svc{i}",
            "http",
            "TCP",
            80,
            address("172.30", i),
            endpoints=(Endpoint(address("10.180", i), 80, is_local=False),),
        )
        for i in range(count)
    ]


@dataclass(frozen=True)
class Sample:
    mode: str
    count: int
    install: float
    first_packet_ms: float


def _install(mode: str, ns: str, svcs: list[ServicePort]) -> float:
    """Render (untimed), then load with the real tool (timed)."""
    if mode == "iptables":
        text = render_iptables(svcs, CONFIG, [NODE_IP]).restore_text()
        start = time.perf_counter()
        iptables_restore(ns, text)
        return time.perf_counter() - start
    if mode == "nftables":
        script = render_nftables(svcs, CONFIG, [NODE_IP]).script()
        start = time.perf_counter()
        nft_apply(ns, script)
        return time.perf_counter() - start
    rules = render_ipvs(svcs, CONFIG, [NODE_IP])
    start = time.perf_counter()
    ip_batch(
        ns,
        ["link add kube-ipvs0 type dummy", "link set kube-ipvs0 up"]
        + [f"addr add {a} dev kube-ipvs0" for a in rules.dummy_addresses],
    )
    ipset_restore_all(ns, rules.ipset_restore())
    iptables_restore(ns, rules.iptables_restore())
    ipvsadm_restore(ns, rules.ipvsadm_restore())
    return time.perf_counter() - start


def measure(mode: str, count: int, connections: int = 20) -> Sample:
    svcs = services(count)
    target = svcs[-1]
    assert target.cluster_ip is not None
    with build(Setup((NODE_IP,), POD_CIDR, CLIENT, target.cluster_ip, 80, "TCP", ())) as env:
        seconds = _install(mode, env.namespaces["node"], svcs)
        echo = EchoServers()
        try:
            echo.listen(Listener("sink", "sink", env.namespaces["sink"], 80, "TCP", transparent=True))
            echo.start()
            latencies = []
            for _ in range(connections):
                start = time.perf_counter()
                result = send(env.source_ns, target.cluster_ip, 80, "TCP", 2.0)
                latencies.append(time.perf_counter() - start)
                if result.outcome != "delivered":
                    raise RuntimeError(f"{mode} with {count} Services: {result.outcome} ({result.error})")
        finally:
            echo.close()
    return Sample(mode, count, seconds, statistics.median(latencies) * 1000)


def run_scale_bench(counts: list[int], modes: list[str], console: Console) -> int:
    table = Table(title="Services vs install time and first-packet latency (median of 20 new connections)")
    for column in ("mode", "Services", "install s", "first packet ms"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for mode in modes:
        for count in counts:
            sample = measure(mode, count)
            table.add_row(mode, str(count), f"{sample.install:.3f}", f"{sample.first_packet_ms:.2f}")
    console.print(table)
    return 0
