"""`lab replay`: install a real node's rules in a fresh namespace, send the packet, report what the kernel did.

The rules are an `iptables-save` dump (replay; with ipsets and ipvs virtual servers) or an nftables
ruleset (replay_nft); both run the same probe loop (_replay) and differ only in how they install the
rules and how they see which rules the packet met (lab.replay.watch).
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from lab.install import InstallError, ip_batch, ipset_restore_all, iptables_restore, ipvsadm_restore, nft_apply
from lab.probe.client import send
from lab.probe.echo import EchoServers, Listener
from lab.replay.dump import Target, dnat_targets, ipvs_table, nft_dnat_targets
from lab.replay.env import Env, Setup, build
from lab.replay.watch import CounterWatcher, NftTraceWatcher, Seen, Watcher


@dataclass(frozen=True)
class Attempt:
    outcome: str  # dnat | local | forwarded | dropped | rejected | refused | unreachable | reset
    endpoint: str | None = None
    source_seen: str | None = None
    trace: tuple[str, ...] = ()


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


def _classify(env: Env, reply: dict[str, str] | None, result_outcome: str, seen: Seen) -> Attempt:
    s = env.setup
    if reply:
        local, source = reply["local"], reply["peer"].rsplit(":", 1)[0]
        if local == f"{s.dst_ip}:{s.dst_port}":
            return Attempt("local" if reply["backend"] == "node" else "forwarded", None, source, seen.trace)
        return Attempt("dnat", local, source, seen.trace)
    if "REJECT" in seen.verdicts:
        return Attempt("rejected", trace=seen.trace)
    if "DROP" in seen.verdicts or result_outcome == "dropped":
        return Attempt("dropped", trace=seen.trace)
    return Attempt(result_outcome, trace=seen.trace)


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
    """An `iptables-save` dump (with the node's ipsets and ipvs virtual servers, if any)."""
    table = ipvs_table(ipvs) if ipvs else {}
    real_servers = [t for servers in table.values() for t in servers]
    setup = Setup(**{**setup_without_targets.__dict__, "targets": tuple(dnat_targets(rules) + real_servers)})

    def install(node_ns: str) -> None:
        if ipsets:
            ipset_restore_all(node_ns, ipsets)
        iptables_restore(node_ns, rules, backend)
        if ipvs:
            _install_ipvs(node_ns, table, ipvs, setup.node_ips)

    virtual = table.get((setup.protocol.lower(), setup.dst_ip, setup.dst_port))
    watcher = partial(CounterWatcher, backend=backend, rules=rules)
    return _replay(setup, install, watcher, len(virtual or ()), timeout)


def replay_nft(ruleset: str, setup_without_targets: Setup, timeout: float = 0.5) -> ReplayResult:
    """An `nft list ruleset` dump, or an `nft -f` script such as kube-proxy's nftables transaction."""
    setup = Setup(**{**setup_without_targets.__dict__, "targets": tuple(nft_dnat_targets(ruleset))})
    return _replay(
        setup, partial(nft_apply, text=ruleset, what="ruleset"), partial(NftTraceWatcher, setup=setup), 0, timeout
    )


def _replay(
    setup: Setup,
    install: Callable[[str], None],
    watcher: Callable[[str], Watcher],
    virtual: int = 0,
    timeout: float = 0.5,
) -> ReplayResult:
    """Install the rules in a fresh node, then connect until every endpoint the first connection's
    load balancing could choose has answered (`virtual`: ipvs' real servers for the destination),
    or something else than a DNAT happens; at most 10 attempts per endpoint, plus 10."""
    with build(setup) as env:
        node_ns = env.namespaces["node"]
        install(node_ns)
        echo = EchoServers()
        watch = None
        try:
            for listener in _listeners(env):
                echo.listen(listener)
            echo.start()
            watch = watcher(node_ns)
            attempts: list[Attempt] = []
            wanted = 1
            while len(attempts) < 10 * wanted + 10:
                mark = watch.mark()
                result = send(env.source_ns, setup.dst_ip, setup.dst_port, setup.protocol, timeout, bind=setup.source)
                seen = watch.seen(mark, result)
                attempts.append(_classify(env, result.reply, result.outcome, seen))
                if len(attempts) == 1:
                    wanted = virtual or seen.spread
                if attempts[-1].outcome != "dnat" or len({a.endpoint for a in attempts}) >= wanted:
                    break
        finally:
            if watch is not None:
                watch.close()
            echo.close()
    return _summarise(setup, attempts)


def _summarise(setup: Setup, attempts: list[Attempt]) -> ReplayResult:
    first = attempts[0]
    endpoints = tuple(sorted({a.endpoint for a in attempts if a.endpoint}))
    seen = tuple(sorted({a.source_seen for a in attempts if a.source_seen}))
    output = {"dnat": ", ".join(endpoints), "dropped": "DROP", "rejected": "REJECT"}.get(first.outcome, "")
    masq = any(s != setup.source for s in seen)
    return ReplayResult(setup, first.outcome, output, masq, endpoints, seen, first.trace, len(attempts))


def read(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {exc.strerror}") from None


def replay_from_args(args: argparse.Namespace) -> ReplayResult:
    """`lab replay`: --rules (iptables-save, with --ipsets, --ipvs) or --nft (nft list ruleset)."""
    setup = setup_from_args(args)
    if args.nft:
        for option, given in (("--ipsets", args.ipsets), ("--ipvs", args.ipvs)):
            if given:
                raise InstallError(f"{option} goes with --rules (an iptables or ipvs node), not with --nft")
        return replay_nft(read(args.nft) or "", setup, timeout=args.timeout)
    return replay(
        read(args.rules) or "",
        setup,
        ipsets=read(args.ipsets),
        backend=args.backend,
        timeout=args.timeout,
        ipvs=read(args.ipvs),
    )


def setup_from_args(args: argparse.Namespace) -> Setup:
    """Check the addresses the user gave; every mistake names the option."""
    host, _, port = args.dest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InstallError(f"--to {args.dest}: expected DST_IP:PORT with a port in 1-65535")

    def checked(option: str, text: str, parse: Callable[[str], object] = ipaddress.IPv4Address) -> str:
        try:
            return str(parse(text))
        except ValueError as exc:
            raise InstallError(
                f"{option} {text}: expected an IPv4 {'CIDR' if option == '--pod-cidr' else 'address'} ({exc})"
            ) from None

    return Setup(
        tuple(checked("--node-ip", ip) for ip in args.node_ip),
        checked("--pod-cidr", args.pod_cidr, ipaddress.IPv4Network) if args.pod_cidr else None,
        checked("--from", args.source),
        checked("--to", host),
        int(port),
        args.proto.upper(),
        (),
    )
