"""`lab bench --scale`: how install time and first-packet latency grow with the number of Services, per mode.

KEP-3866 motivates kube-proxy's nftables mode by exactly this: iptables walks KUBE-SERVICES rule by rule,
nftables looks the destination up in a verdict map. Each run builds one node namespace (the replay
environment: a client pod on cni0, every endpoint behind the uplink), installs N ClusterIP Services with one
endpoint each, and times (a) loading the rendered rules with the real tool and (b) new connections to the
last Service, each a fresh conntrack entry, so every one walks the rules. The connection's time as the
client sees it is mostly the Python client's own; the node's part is read from kernel timestamps: the SYN
leaving the pod (its eth0) to the same SYN, DNATed, leaving the node for the endpoint (the node's eth0).
Not from the node's cni0: with br_netfilter, PREROUTING (the DNAT, the rule walk) runs as the frame
enters the bridge port, before cni0 sees it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from lab.install.dataplane import Writers, load
from lab.install.echo import EchoServers, Listener
from lab.install.tools import Xtables
from lab.probe.capture import Captures, Frame
from lab.probe.client import send
from lab.render.dataplane import NodeDataplane, ipvs_plane
from lab.render.kubeproxy.iptables import DEFAULT_VERSION, render_iptables
from lab.render.kubeproxy.ipvs import render_ipvs
from lab.render.kubeproxy.nftables import render_nftables
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
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
    connect_ms: float
    transit_us: float  # the SYN through the node: pod eth0 out → node eth0 out, kernel timestamps (median)
    transit_min_us: float  # the same, fastest: the least disturbed by anything else on the machine


def plane(mode: str, svcs: list[ServicePort], version: str = DEFAULT_VERSION) -> NodeDataplane:
    """kube-proxy `version`'s first sync of `svcs` on the bench's node, as install loads it (iptables-legacy: the
    same rules as iptables, loaded with the legacy tools)."""
    if mode in ("iptables", "iptables-legacy"):
        return NodeDataplane("iptables", iptables=render_iptables(svcs, CONFIG, [NODE_IP], version).restore_text())
    if mode == "nftables":
        return NodeDataplane("nftables", nft=render_nftables(svcs, CONFIG, [NODE_IP], version).script())
    return ipvs_plane(render_ipvs(svcs, CONFIG, [NODE_IP], version))


def writers(mode: str) -> Writers:
    """This machine's tools, the iptables ones of the mode's backend (iptables-legacy: the legacy tools)."""
    return Writers(xt=Xtables("legacy" if mode == "iptables-legacy" else "nft"))


def _install(mode: str, ns: str, svcs: list[ServicePort]) -> float:
    """Render (untimed), then load with the real tools (timed)."""
    rules = plane(mode, svcs)
    start = time.perf_counter()
    load(ns, rules, writers(mode))
    return time.perf_counter() - start


def _transit(frames: list[Frame]) -> float:
    """Seconds from the SYN leaving the pod to it leaving the node."""
    syns = [f for f in frames if f.outgoing and (f.summary() or "").endswith("tcp [S]")]
    return next(f.at for f in syns if f.actor == "node") - next(f.at for f in syns if f.actor == "pod")


def measure(mode: str, count: int, connections: int = 50) -> Sample:
    svcs = services(count)
    target = svcs[-1]
    assert target.cluster_ip is not None
    with build(Setup((NODE_IP,), POD_CIDR, CLIENT, target.cluster_ip, 80, "TCP", ())) as env:
        node = env.namespaces["node"]
        seconds = _install(mode, node, svcs)
        echo, captures = EchoServers(), Captures()
        try:
            echo.listen(Listener("sink", "sink", env.namespaces["sink"], 80, "TCP", transparent=True))
            captures.add("pod", env.source_ns, {"eth0"})
            captures.add("node", node, {"eth0"})
            echo.start()
            captures.start()
            latencies, transits = [], []
            for _ in range(connections):
                mark = captures.mark()
                start = time.perf_counter()
                result = send(env.source_ns, target.cluster_ip, 80, "TCP", 2.0)
                latencies.append(time.perf_counter() - start)
                if result.outcome != "delivered":
                    raise RuntimeError(f"{mode} with {count} Services: {result.outcome} ({result.error})")
                transits.append(_transit(captures.since(mark)))
        finally:
            captures.close()
            echo.close()
    return Sample(
        mode, count, seconds, statistics.median(latencies) * 1e3, statistics.median(transits) * 1e6, min(transits) * 1e6
    )


def run_scale_bench(counts: list[int], modes: list[str], console: Console) -> int:
    table = Table(title="Services vs install time and first-packet latency (median of 50 new connections)")
    for column in ("mode", "Services", "install s", "connect ms", "SYN through the node µs (median / min)"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for mode in modes:
        for count in counts:
            sample = measure(mode, count)
            table.add_row(
                mode,
                str(count),
                f"{sample.install:.3f}",
                f"{sample.connect_ms:.2f}",
                f"{sample.transit_us:.1f} / {sample.transit_min_us:.1f}",
            )
    console.print(table)
    return 0
