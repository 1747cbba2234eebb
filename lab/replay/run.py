"""`lab replay`: install a real node's rules in a fresh namespace, send the packet, report what the kernel did."""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from lab.install import (
    InstallError,
    RuleHit,
    counter_hits,
    ip_batch,
    ipset_restore_all,
    iptables_restore,
    iptables_save,
    ipvsadm_restore,
    parse_counters,
)
from lab.probe.client import send
from lab.probe.echo import EchoServers, Listener
from lab.replay.dump import Target, chain_candidates, dnat_targets, ipvs_table
from lab.replay.env import Env, Setup, build


@dataclass(frozen=True)
class Attempt:
    outcome: str  # dnat | local | forwarded | dropped | rejected | refused | unreachable | reset
    endpoint: str | None = None
    source_seen: str | None = None
    hits: tuple[RuleHit, ...] = ()


@dataclass(frozen=True)
class ReplayResult:
    setup: Setup
    outcome: str
    output: str
    masq: bool
    endpoints: tuple[str, ...]
    source_seen: tuple[str, ...]
    trace: tuple[str, ...]
    attempts: int

    def as_json(self) -> dict[str, object]:
        return {
            "from": self.setup.source,
            "to": f"{self.setup.dst_ip}:{self.setup.dst_port}",
            "protocol": self.setup.protocol.lower(),
            "output": self.output,
            "masq": self.masq,
            "outcome": self.outcome,
            "endpoints": list(self.endpoints),
            "source_seen": self.source_seen[0] if len(self.source_seen) == 1 else list(self.source_seen) or None,
            "trace": list(self.trace),
            "attempts": self.attempts,
        }


def _listeners(env: Env) -> list[Listener]:
    s = env.setup
    ports = {"node": {s.dst_port}, "sink": {s.dst_port}}
    for t in s.targets:
        port = t.port or s.dst_port
        where = "node" if t.ip in s.node_ips else f"pod-{t.ip}" if s.in_pods(t.ip) else "sink"
        ports.setdefault(where, set()).add(port)
    return [
        Listener(where, "node", env.namespaces[where], port, s.protocol, transparent=where == "sink")
        for where, numbers in ports.items()
        for port in sorted(numbers)
    ]


def _classify(env: Env, reply: dict[str, str] | None, result_outcome: str, hits: list[RuleHit]) -> Attempt:
    s = env.setup
    verdicts = [h.verdict for h in hits]
    if reply:
        local, seen = reply["local"], reply["peer"].rsplit(":", 1)[0]
        if local == f"{s.dst_ip}:{s.dst_port}":
            return Attempt("local" if reply["backend"] == "node" else "forwarded", None, seen, tuple(hits))
        return Attempt("dnat", local, seen, tuple(hits))
    if "REJECT" in verdicts:
        return Attempt("rejected", hits=tuple(hits))
    if "DROP" in verdicts or result_outcome == "dropped":
        return Attempt("dropped", hits=tuple(hits))
    return Attempt(result_outcome, hits=tuple(hits))


def _load_balanced_over(dump: str, hits: list[RuleHit]) -> int:
    """How many endpoints the chain that chose this packet's endpoint spreads over (1 if none)."""
    for hit in hits:
        if hit.verdict.startswith("KUBE-SEP-"):
            return max(1, len(set(chain_candidates(dump, hit.chain))))
    return 1


def _install_ipvs(
    node_ns: str, table: dict[tuple[str, str, int], list[Target]], dump: str, node_ips: tuple[str, ...]
) -> None:
    """kube-proxy's ipvs side: every virtual address on kube-ipvs0 (the node's own stay where they are)."""
    from lab.doctor import kernel_has, skip_reason

    for feature in ("ip_vs", "dummy"):
        if not kernel_has(feature):
            raise InstallError(f"--ipvs {skip_reason(feature)}; e.g. lab vm run -- .venv/bin/lab replay ...")
    vips = sorted({vip for _, vip, _ in table if vip not in node_ips})
    ip_batch(
        node_ns,
        ["link add kube-ipvs0 type dummy", "link set kube-ipvs0 up"]
        + [f"addr add {vip}/32 dev kube-ipvs0" for vip in vips],
    )
    ipvsadm_restore(node_ns, dump)


def replay(
    rules: str,
    setup_without_targets: Setup,
    ipsets: str | None = None,
    backend: str = "nft",
    timeout: float = 0.5,
    ipvs: str | None = None,
) -> ReplayResult:
    table = ipvs_table(ipvs) if ipvs else {}
    real_servers = [t for servers in table.values() for t in servers]
    setup = Setup(**{**setup_without_targets.__dict__, "targets": tuple(dnat_targets(rules) + real_servers)})
    with build(setup) as env:
        node_ns = env.namespaces["node"]
        if ipsets:
            ipset_restore_all(node_ns, ipsets)
        iptables_restore(node_ns, rules, backend)
        if ipvs:
            _install_ipvs(node_ns, table, ipvs, setup.node_ips)
        echo = EchoServers()
        try:
            for listener in _listeners(env):
                echo.listen(listener)
            echo.start()
            attempts: list[Attempt] = []
            counters = parse_counters(iptables_save(node_ns, backend, counters=True))
            wanted = 1
            while len(attempts) < 10 * wanted + 10:
                result = send(env.source_ns, setup.dst_ip, setup.dst_port, setup.protocol, timeout, bind=setup.source)
                after = parse_counters(iptables_save(node_ns, backend, counters=True))
                hits = counter_hits(counters, after)
                counters = after
                attempts.append(_classify(env, result.reply, result.outcome, hits))
                if len(attempts) == 1:
                    virtual = table.get((setup.protocol.lower(), setup.dst_ip, setup.dst_port))
                    wanted = len(virtual) if virtual else _load_balanced_over(rules, hits)
                if attempts[-1].outcome != "dnat" or len({a.endpoint for a in attempts}) >= wanted:
                    break
        finally:
            echo.close()
    return _summarise(setup, attempts)


def _summarise(setup: Setup, attempts: list[Attempt]) -> ReplayResult:
    first = attempts[0]
    endpoints = tuple(sorted({a.endpoint for a in attempts if a.endpoint}))
    seen = tuple(sorted({a.source_seen for a in attempts if a.source_seen}))
    output = {"dnat": ", ".join(endpoints), "dropped": "DROP", "rejected": "REJECT"}.get(first.outcome, "")
    trace = tuple(f"{h.table} {h.chain}: {h.rule}" for h in first.hits)
    masq = any(s != setup.source for s in seen)
    return ReplayResult(setup, first.outcome, output, masq, endpoints, seen, trace, len(attempts))


def read(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror}") from None


def setup_from_args(args: argparse.Namespace) -> Setup:
    """Check the addresses the user gave; every mistake names the option."""
    try:
        node_ips = tuple(str(ipaddress.IPv4Address(ip)) for ip in args.node_ip)
        source = str(ipaddress.IPv4Address(args.source))
        host, _, port = args.dest.rpartition(":")
        dst = str(ipaddress.IPv4Address(host))
        pod_cidr = str(ipaddress.IPv4Network(args.pod_cidr)) if args.pod_cidr else None
    except ValueError as exc:
        raise InstallError(f"bad address: {exc}") from None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InstallError(f"--to {args.dest}: expected DST_IP:PORT with a port in 1-65535")
    return Setup(node_ips, pod_cidr, source, dst, int(port), args.proto.upper(), ())
