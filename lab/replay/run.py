"""`lab replay`: install a real node's rules in a fresh namespace, send the packet, report what the kernel did.

The rules are an `iptables-save` dump (replay; with ipsets and ipvs virtual servers) or an nftables
ruleset (replay_nft); both run the same probe loop (_replay) and differ only in how they install the
rules and how they see which rules the packet met (lab.replay.watch). A dump that cannot answer (no
rules, or kube-proxy's chains with nothing leading there) is refused before anything is built.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from lab.describe.digits import is_ascii_number
from lab.describe.ip import IP, AddressError, parse_ip, parse_network
from lab.describe.readfile import ReadError, read_text
from lab.describe.releases import check_version
from lab.doctor import kernel_has, skip_reason
from lab.install.echo import EchoServers, Listener
from lab.install.tools import (
    InstallError,
    Xtables,
    ip_batch,
    ipset_restore_all,
    iptables_restore,
    ipvsadm_restore,
    nft_apply,
)
from lab.probe.choices import enough_attempts
from lab.probe.client import send
from lab.realize.enter import write_sysctls
from lab.realize.families import endpoint, host_prefixlen
from lab.replay.affinity import Affinity, RecentLists
from lab.replay.dump import (
    DumpError,
    Target,
    check_nft_hooks,
    dnat_targets,
    ipvs_table,
    nfacct_names,
    nft_dnat_targets,
    recent_lists,
)
from lab.replay.env import SINK_ARP_ADDRESS, SINK_LINK_LOCAL, WORLD_ARP_ADDRESS, WORLD_LINK_LOCAL, Env, Setup, build
from lab.replay.families import FAMILIES, OPTION, SAVE_TOOL, XtablesDump, version_of, xtables_dumps
from lab.replay.jumps import add_kube_jumps, check_reaches_kube_proxy
from lab.replay.nfacct import create_nfacct_objects
from lab.replay.recognise import check_first_line
from lab.replay.review import review_ipsets, review_iptables, review_ipvs, review_nft
from lab.replay.watch import Seen, Watcher, counter_watcher, nft_trace_watcher


@dataclass(frozen=True)
class Attempt:
    # dnat | local | accepted | forwarded | dropped | rejected | refused | unreachable | reset | unanswered
    outcome: str
    endpoint: str | None = None
    source_seen: str | None = None
    trace: tuple[str, ...] = ()
    spread: int = 1  # endpoints the load balancing that picked this one chose among


# Outcomes in kube-proxy's packet-flow test words; the rest (refused, unreachable, reset, unanswered: the
# connection failed and no rule says why) have none, and their output is None.
OUTPUT_WORDS = {"local": "", "forwarded": "", "accepted": "ACCEPT", "dropped": "DROP", "rejected": "REJECT"}


@dataclass(frozen=True)
class ReplayResult:
    setup: Setup
    outcome: str
    output: str | None
    masq: bool
    endpoints: tuple[str, ...]
    source_seen: tuple[str, ...]
    trace: tuple[str, ...]
    attempts: int
    affinity: Affinity | None = None
    added: tuple[str, ...] = ()  # what --add-kube-jumps added to the dump, "table: line"
    choices: int = 1  # the load balancing's choices drawn (endpoints, or rules that drop): the set the result says

    def as_json(self) -> dict[str, object]:
        return {
            "from": self.setup.source,
            "to": endpoint(self.setup.dst_ip, self.setup.dst_port),
            "protocol": self.setup.protocol.lower(),
            "output": self.output,
            "masq": self.masq,
            "outcome": self.outcome,
            "endpoints": list(self.endpoints),
            "source_seen": self.source_seen[0] if len(self.source_seen) == 1 else list(self.source_seen) or None,
            "affinity": self.affinity.as_json() if self.affinity else None,
            "trace": list(self.trace),
            "attempts": self.attempts,
            "choices": self.choices,
            "added": list(self.added),
        }


def _listeners(env: Env) -> list[Listener]:
    s = env.setup
    ports = {"node": {s.dst_port}, "sink": {s.dst_port}}
    if s.dst_ip in s.pod_ips():
        ports[f"pod-{s.dst_ip}"] = {s.dst_port}
    for t in s.targets:
        if t.version != s.version:
            continue  # the other family's proxier: no packet of this replay goes there
        port = t.port or s.dst_port
        where = "node" if t.ip in s.node_ips else f"pod-{t.ip}" if s.in_pods(t.ip) else "sink"
        ports.setdefault(where, set()).add(port)
    families = (FAMILIES[s.version],)
    return [
        Listener(where, "node", env.namespaces[where], port, s.protocol, transparent=where == "sink", families=families)
        for where, numbers in ports.items()
        for port in sorted(numbers)
    ]


def _accepted(trace: tuple[str, ...]) -> bool:
    """Did one of kube-proxy's filter rules accept the packet (a health check NodePort), as its tracer says ACCEPT?"""
    return any(line.startswith("filter KUBE-") and line.endswith(" -j ACCEPT") for line in trace)


def _classify(env: Env, reply: dict[str, str] | None, result_outcome: str, seen: Seen) -> Attempt:
    s = env.setup
    if reply:
        local, source = reply["local"], reply["peer"].rsplit(":", 1)[0].strip("[]")
        if local != endpoint(s.dst_ip, s.dst_port):
            return Attempt("dnat", local, source, seen.trace, seen.spread)
        delivered = "forwarded" if reply["backend"] != "node" else "accepted" if _accepted(seen.trace) else "local"
        return Attempt(delivered, None, source, seen.trace, seen.spread)
    if "REJECT" in seen.verdicts:
        return Attempt("rejected", trace=seen.trace, spread=seen.spread)
    if "DROP" in seen.verdicts:
        return Attempt("dropped", trace=seen.trace, spread=seen.spread)
    # No answer and no rule that dropped it: the kernel lost it, which is no DROP of kube-proxy's.
    return Attempt(
        "unanswered" if result_outcome == "dropped" else result_outcome, trace=seen.trace, spread=seen.spread
    )


# What kube-proxy in ipvs mode sets on start in every release (NewProxier's EnsureSysctl; the lab's render writes
# them with the rest, lab/render/kubeproxy/ipvs.py): without vs/conntrack the packets IPVS forwards skip the nat
# table's POSTROUTING, so none is masqueraded.
IPVS_SYSCTLS = {
    "net.ipv4.vs.conntrack": "1",
    "net.ipv4.vs.expire_nodest_conn": "1",
    "net.ipv4.vs.expire_quiescent_template": "1",
}


def _install_ipvs(
    node_ns: str, table: dict[tuple[str, str, int], list[Target]], dump: str, node_ips: tuple[str, ...]
) -> None:
    """kube-proxy's ipvs side: every virtual address on kube-ipvs0 (the node's own stay where they are), a /32 or
    a /128 as each proxier binds them."""
    for feature in ("ip_vs", "dummy"):
        if not kernel_has(feature):
            raise InstallError(f"--ipvs {skip_reason(feature)}; e.g. lab vm run -- .venv/bin/lab replay ...")
    vips = sorted({vip for _, vip, _ in table if vip not in node_ips})
    ip_batch(
        node_ns,
        ["link add kube-ipvs0 type dummy", "link set kube-ipvs0 up"]
        + [f"addr add {vip}/{host_prefixlen(vip)} dev kube-ipvs0" for vip in vips],
    )
    ipvsadm_restore(node_ns, dump)
    write_sysctls(node_ns, IPVS_SYSCTLS)  # ip_vs is loaded now: its sysctls exist


def replay(
    rules: str | None,
    setup_without_targets: Setup,
    ipsets: str | None = None,
    backend: str = "nft",
    timeout: float = 0.5,
    ipvs: str | None = None,
    kube_jumps: str | None = None,
    rules6: str | None = None,
) -> ReplayResult:
    """An `iptables-save` dump and/or an `ip6tables-save` one (`rules` may hold both, lab.replay.families), with
    the node's ipsets and ipvs virtual servers, if any. Every family's dump is installed; the packet walks its
    own family's. `kube_jumps`: a kube-proxy version whose jumps from the built-in chains to add
    (lab.replay.jumps). Every dump is reviewed (lab.replay.review) before anything is built."""
    for text, option in ((rules, "rules"), (rules6, "rules6")):
        if text is not None:
            review_iptables(text, option)
    if ipsets:
        review_ipsets(ipsets)
    if ipvs:
        review_ipvs(ipvs)
    dumps, added = _complete(xtables_dumps(rules, rules6), kube_jumps)
    walked = dumps.get(setup_without_targets.version)
    if walked is None:
        raise _no_dump_of_the_family(setup_without_targets, dumps)
    check_reaches_kube_proxy(walked.text, walked.dump)
    table = ipvs_table(ipvs) if ipvs else {}
    real_servers = [t for servers in table.values() for t in servers]
    targets = [t for dump in dumps.values() for t in dnat_targets(dump.text, dump.dump)]
    setup = Setup(**{**setup_without_targets.__dict__, "targets": tuple(dict.fromkeys(targets + real_servers))})

    def install(node_ns: str) -> None:
        if ipsets:
            ipset_restore_all(node_ns, ipsets)
        create_nfacct_objects(node_ns, list(dict.fromkeys(n for d in dumps.values() for n in nfacct_names(d.text))))
        for dump in dumps.values():
            iptables_restore(node_ns, dump.text, Xtables(backend), FAMILIES[dump.version])
        if ipvs:
            _install_ipvs(node_ns, table, ipvs, setup.node_ips)

    virtual = table.get((setup.protocol.lower(), setup.dst_ip, setup.dst_port))
    watcher = partial(counter_watcher, backend=backend, rules=walked.text, version=walked.version)
    return _replay(setup, install, watcher, len(virtual or ()), timeout, recent_lists(walked.text), tuple(added))


def _complete(dumps: dict[int, XtablesDump], kube_jumps: str | None) -> tuple[dict[int, XtablesDump], list[str]]:
    """Each family's dump with kube-proxy's jumps added (--add-kube-jumps), and what was added ("ip6tables" before
    the IPv6 dump's lines)."""
    if not kube_jumps:
        return dumps, []
    completed, added = {}, []
    for version, dump in dumps.items():
        text, lines = add_kube_jumps(dump.text, kube_jumps, FAMILIES[version], dump.dump)
        completed[version] = replace(dump, text=text)
        added += [f"ip6tables {line}" if version == 6 else line for line in lines]
    return completed, added


def _no_dump_of_the_family(setup: Setup, dumps: dict[int, XtablesDump]) -> InstallError:
    family, tool = FAMILIES[setup.version], SAVE_TOOL[setup.version]
    given = ", ".join(f"{SAVE_TOOL[v]} (--{d.dump})" for v, d in dumps.items()) or "none"
    return InstallError(
        f"--to {setup.dst_ip} is an {family} address, so the packet walks the node's {family} proxier's rules, and "
        f"no {tool} dump was given (given: {given}); give it with --{OPTION[setup.version]} FILE, or after the "
        f"other family's dump in the same file, after its `# Generated by {tool}` line"
    )


def replay_nft(ruleset: str, setup_without_targets: Setup, timeout: float = 0.5) -> ReplayResult:
    """An `nft list ruleset` dump, or an `nft -f` script such as kube-proxy's nftables transaction (reviewed first:
    lab.replay.review)."""
    review_nft(ruleset)
    check_nft_hooks(ruleset, setup_without_targets.version)
    setup = Setup(**{**setup_without_targets.__dict__, "targets": tuple(nft_dnat_targets(ruleset))})
    return _replay(
        setup, partial(nft_apply, text=ruleset, what="ruleset"), partial(nft_trace_watcher, setup=setup), 0, timeout
    )


def _replay(
    setup: Setup,
    install: Callable[[str], None],
    watcher: Callable[[str], Watcher],
    virtual: int = 0,
    timeout: float = 0.5,
    recent: dict[str, int | None] | None = None,
    added: tuple[str, ...] = (),
) -> ReplayResult:
    """Install the rules in a fresh node, stand up every endpoint, and explore (`recent`: the rules' xt_recent
    lists, {name: seconds})."""
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
            lists = RecentLists(node_ns, recent) if recent else None
            attempts, affinity = _explore(partial(_probe, env, watch, timeout), virtual, lists)
        finally:
            if watch is not None:
                watch.evidence.close()
            echo.close()
    return _summarise(setup, attempts, affinity, added)


def _probe(env: Env, watch: Watcher, timeout: float) -> Attempt:
    """One real connection (or datagram), and what the node's rules did to it."""
    s = env.setup
    mark = watch.evidence.mark()
    result = send(env.source_ns, s.dst_ip, s.dst_port, s.protocol, timeout, bind=s.source)
    return _classify(env, result.reply, result.outcome, watch.seen(mark, result))


def _explore(
    probe: Callable[[], Attempt], virtual: int, recent: RecentLists | None
) -> tuple[list[Attempt], Affinity | None]:
    """Connect until every choice the load balancing has has been drawn (`virtual`: ipvs' real servers for the
    destination; else the spread the rules met say), whatever each choice does to the packet: a choice that drops
    it is one of the set, not the verdict of the one connection that drew it (at most enough_attempts, which
    misses a choice in fewer than one run in a million). Under session affinity the second connection meets the
    recent lists as the first left them (is it sent back to the same endpoint?), and every later one meets them
    empty."""
    attempts = [probe()]
    first = attempts[0]
    affinity = None
    if first.outcome == "dnat" and recent and (lists := recent.recorded(first.trace)):
        attempts.append(again := probe())
        affinity = recent.affinity(lists, first.endpoint, again.endpoint, again.trace)

    def more() -> bool:
        wanted = virtual or max(a.spread for a in attempts)
        return len(choices(attempts)) < wanted and len(attempts) < enough_attempts(wanted)

    while more():
        if recent:
            recent.forget()
        attempts.append(probe())
    return attempts, affinity


def choices(attempts: list[Attempt]) -> dict[tuple[str, ...], Attempt]:
    """The attempts by the choice each drew, in a fixed order: the endpoint it was DNATed to, else the rules it
    met (a choice that dropped it went through its own endpoint chain); the first attempt of each."""
    drawn: dict[tuple[str, ...], Attempt] = {}
    for a in attempts:
        drawn.setdefault((a.endpoint,) if a.endpoint else a.trace, a)
    return {key: drawn[key] for key in sorted(drawn)}


def _summarise(
    setup: Setup, attempts: list[Attempt], affinity: Affinity | None, added: tuple[str, ...]
) -> ReplayResult:
    """The set of choices drawn, said the same whichever came first: the outcomes each had, every endpoint, and
    the rules of the first choice in their order."""
    drawn = list(choices(attempts).values())
    outcomes = tuple(sorted({a.outcome for a in drawn}, key=lambda o: (o != "dnat", o)))
    endpoints = tuple(sorted({a.endpoint for a in attempts if a.endpoint}))
    seen = tuple(sorted({a.source_seen for a in attempts if a.source_seen}))
    words = [", ".join(endpoints) if o == "dnat" else OUTPUT_WORDS.get(o) for o in outcomes]
    output = None if None in words else ", ".join(w for w in words if w)
    masq = any(s != setup.source for s in seen)
    shown = next(a for a in drawn if a.outcome == outcomes[0])
    return ReplayResult(
        setup,
        "|".join(outcomes),
        output,
        masq,
        endpoints,
        seen,
        shown.trace,
        len(attempts),
        affinity,
        added,
        len(drawn),
    )


def read(option: str, path: str | None) -> str | None:
    """A dump the user gave, bounded and checked as lab.describe.readfile reads every file, and recognised as the
    dump `option` gives (a DumpError before then)."""
    if not path:
        return None
    try:
        text = read_text(path)
    except ReadError as exc:
        where = f"{option} {path}" + (f" line {exc.line}" if exc.line else "")
        hint = "; iptables-save, nft and ipvsadm write UTF-8, so this is not one of their dumps as written"
        raise InstallError(f"{where}: {exc.reason}{hint if exc.line else ''}") from None
    check_first_line(option.removeprefix("--"), text)
    return text


def replay_from_args(args: argparse.Namespace) -> ReplayResult:
    """`lab replay`: --rules and/or --rules6 (iptables-save, ip6tables-save, with --ipsets, --ipvs) or --nft (nft list
    ruleset)."""
    dumps = {"rules": args.rules, "rules6": args.rules6, "nft": args.nft}
    if not args.nft and not args.rules and not args.rules6:
        raise InstallError("give the node's rules: --rules (iptables-save), --rules6 (ip6tables-save) or --nft")
    setup = setup_from_args(args)
    given = {**dumps, "ipvs": args.ipvs, "ipsets": args.ipsets}
    try:
        return _replay_dumps(args, setup)
    except DumpError as exc:
        where = f"--{exc.dump} {given[exc.dump]}" + (f" line {exc.line}" if exc.line else "")
        raise InstallError(f"{where}: {exc.reason}") from None


def _replay_dumps(args: argparse.Namespace, setup: Setup) -> ReplayResult:
    if args.nft:
        if args.rules or args.rules6:
            raise InstallError(
                "give an iptables node's dumps (--rules, --rules6) or an nftables node's --nft, not both"
            )
        for option, value in (
            ("--ipsets", args.ipsets),
            ("--ipvs", args.ipvs),
            ("--add-kube-jumps", args.kube_jumps),
        ):
            if value:
                raise InstallError(f"{option} goes with --rules (an iptables or ipvs node), not with --nft")
        return replay_nft(read("--nft", args.nft) or "", setup, timeout=args.timeout)
    if args.kube_jumps and (problem := check_version(args.kube_jumps)):
        raise InstallError(f"--add-kube-jumps {args.kube_jumps}: {problem}")
    rules, rules6 = read("--rules", args.rules), read("--rules6", args.rules6)
    ipsets, ipvs = read("--ipsets", args.ipsets), read("--ipvs", args.ipvs)
    return replay(
        rules,
        setup,
        ipsets=ipsets,
        backend=args.backend,
        timeout=args.timeout,
        ipvs=ipvs,
        kube_jumps=args.kube_jumps,
        rules6=rules6,
    )


def _address(option: str, text: str) -> IP:
    """An address of a flag, as Kubernetes parses one (lab/describe/ip.py): it reaches the commands that build the
    node, so nothing but an address's characters may."""
    try:
        address = parse_ip(text)
    except AddressError as exc:
        raise InstallError(f"{option}: {exc}") from None
    if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
        raise InstallError(f"{option} {text}: not an address of one host (unspecified, multicast or broadcast)")
    if address.version == 6 and address.is_link_local:
        raise InstallError(
            f"{option} {text}: an IPv6 link-local address, which no route leads to off its link (and the lab's "
            f"router and sink use {WORLD_LINK_LOCAL} and {SINK_LINK_LOCAL}); give a global or unique local address"
        )
    return address


def _node_ip(text: str) -> str:
    address = _address("--node-ip", text)
    if address.is_loopback:
        raise InstallError(
            f"--node-ip {text}: a loopback address, which the node namespace has on lo already; give the node's "
            "interface addresses (--from 127.0.0.1 sends from the node itself)"
        )
    if str(address) in (WORLD_ARP_ADDRESS, SINK_ARP_ADDRESS):
        raise InstallError(f"--node-ip {text}: the lab's own router and sink use {WORLD_ARP_ADDRESS}-2")
    return str(address)


def _pod_cidr(texts: list[str] | None, version: int) -> str | None:
    """The pod CIDR of the packet's family among those given (one per family)."""
    networks = []
    for text in texts or ():
        try:
            networks.append(parse_network(text, exact=True))
        except AddressError as exc:
            raise InstallError(f"--pod-cidr: {exc}") from None
        if networks[-1].num_addresses < 4:
            raise InstallError(f"--pod-cidr {text}: too small to hold the node's cni0 address and a pod")
    for family in (4, 6):
        if len(same := [str(n) for n in networks if n.version == family]) > 1:
            raise InstallError(f"--pod-cidr {', '.join(same)}: one pod CIDR per family")
    return next((str(n) for n in networks if n.version == version), None)


def _destination(dest: str) -> tuple[str, int]:
    """--to DST_IP:PORT, an IPv6 address in brackets ([fd00::1]:80), as kube-proxy and its tests write one."""
    host, _, port = dest.rpartition(":")
    if not host or not is_ascii_number(port) or not 0 < int(port) < 65536:
        raise InstallError(f"--to {dest}: expected DST_IP:PORT with a port in 1-65535 ([IPv6 address]:PORT)")
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1], int(port)
    if ":" in host:
        raise InstallError(f"--to {dest}: write an IPv6 destination in brackets, [ADDRESS]:PORT")
    return host, int(port)


def setup_from_args(args: argparse.Namespace) -> Setup:
    """Check the addresses the user gave; every mistake names the option. The packet's family is its
    destination's; its source must be of that family, and the node must have an address of it."""
    host, port = _destination(args.dest)
    node_ips = tuple(_node_ip(ip) for ip in args.node_ip)
    if repeated := sorted({ip for ip in node_ips if node_ips.count(ip) > 1}):
        raise InstallError(f"--node-ip {', '.join(repeated)}: given more than once")
    source, dest = _address("--from", args.source), _address("--to", host)
    family = FAMILIES[dest.version]
    if source.version != dest.version:
        raise InstallError(
            f"--from {source} and --to {args.dest}: a packet has one family, and these are "
            f"{FAMILIES[source.version]} and {family}"
        )
    if not any(version_of(ip) == dest.version for ip in node_ips):
        raise InstallError(
            f"--node-ip {', '.join(node_ips)}: none is {family}, and the packet to {dest} is; give the node's "
            f"{family} address too (a dual-stack node has one of each)"
        )
    pod_cidr = _pod_cidr(args.pod_cidr, dest.version)
    setup = Setup(node_ips, pod_cidr, str(source), str(dest), port, args.proto.upper(), ())
    if str(source) == setup.bridge_ip and str(source) not in node_ips:
        raise InstallError(
            f"--from {source}: the node's own cni0 address (the first of --pod-cidr), which no pod can have; to "
            "send from the node, give one of its --node-ip addresses"
        )
    return setup
