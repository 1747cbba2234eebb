"""A probe's translation chain: each decision that changed or chose its packets, in path order, from the evidence
the lab collects (the rules the kernel says they met, the captures before and after a node), each tied to the
setting that wrote the deciding rule (render/kubeproxy/because.py). A step the evidence does not show is not said.

Pure: the rules met, the hops the captures saw and why each node's rules were written go in, a frozen Diagnosis
comes out; report shows it, a what-if reads the settings behind it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.describe.families import host_port
from lab.probe.evidence.base import RuleHit
from lab.render.kubeproxy.because import CHOICE, MARK, Because, Setting

if TYPE_CHECKING:  # an Observation holds its Diagnosis: the hops are only read here
    from lab.probe.observation import Hop

DNAT, IPVS, MARKED, MASQUERADE, HAIRPIN, UNNAT = "dnat", "ipvs", "mark", "masquerade", "hairpin", "un-nat"

_COMMENT = re.compile(r'(--comment|comment) "(?:[^"\\]|\\.)*"|--comment \S+')
_NFT_SOURCE_NAT = re.compile(r"(^|\s)(masquerade|snat( ip)? to)(\s|$)")
_NFT_DNAT = re.compile(r"(^|\s)dnat( ip)?( addr \. port)? to (\S+)")
_TO_DESTINATION = re.compile(r"--to-destination (\S+)")
_COMMENT_TEXT = re.compile(r'comment "((?:[^"\\]|\\.)*)"|--comment ([^\s"]\S*)')


@dataclass(frozen=True)
class Step:
    """One decision of the chain: what was done (`kind`), on which node, where (table and chain, the virtual server,
    the bridge, conntrack), in words (`said`), the rule as the kernel's evidence shows it, the setting that wrote the
    deciding rule (None: none the lab knows), and the evidence that shows it."""

    kind: str  # DNAT, IPVS, MARKED, MASQUERADE, HAIRPIN, UNNAT
    node: str
    where: str
    said: str
    rule: str = ""
    setting: Setting | None = None
    evidence: str = ""
    # A masquerade's source before and after the node, where the captures saw both.
    source: tuple[str, str] | None = None

    def line(self) -> str:
        """The step as `-v` prints it: one line."""
        why = f" [{self.setting}: {self.setting.meaning}]" if self.setting and self.setting.meaning else ""
        return f"{self.node}: {self.said}{why} ({self.evidence})"

    @property
    def rewrote_source(self) -> bool:
        return self.source is not None and self.source[0] != self.source[1]


@dataclass(frozen=True)
class Bridge:
    """The nodes' pod bridge: its name, its ports (the pods' veths), and the setting that decides whether it sends a
    frame back out of the port it came in by."""

    name: str
    ports: frozenset[str]
    hairpin: Setting


@dataclass(frozen=True)
class Diagnosis:
    """A probe's steps in path order (the forward packet's, then the reply's)."""

    steps: tuple[Step, ...] = ()

    @property
    def settings(self) -> tuple[Setting, ...]:
        """The settings behind the rules that acted, each once, in path order: what a what-if may change."""
        found: list[Setting] = []
        for step in self.steps:
            if step.setting is not None and step.setting not in found:
                found.append(step.setting)
        return tuple(found)

    def summary(self) -> str:
        """One line for a rewritten source: where it was masqueraded and the setting behind it, and the bridge a
        hairpin went back through ("" when no step rewrote the source)."""
        parts = []
        for step in self.steps:
            if step.kind == MASQUERADE and step.rewrote_source:
                why = f": {step.setting}" if step.setting else f" by {step.where}"
                parts.append(f"masqueraded on {step.node}{why}")
            elif step.kind == HAIRPIN:
                parts.append(f"hairpinned on {step.node} through {step.where}: {step.setting}")
        return "; ".join(parts)


def diagnose(
    hits: Sequence[tuple[str, RuleHit]],
    hops: Sequence[Hop],
    because: Callable[[str], PlacedReasons],
    names: Mapping[str, str],
    bridge: Bridge | None = None,
) -> Diagnosis:
    """The chain of a probe whose packets met `hits` (in path order) and were seen as `hops`; `because` tells why a
    node's rules were written (indexed: `PlacedReasons.of`), `names` names addresses, `bridge` is the nodes' pod
    bridge (None: none)."""
    forward = _forward(hops)
    steps: list[Step] = []
    for node in _nodes(hits, hops):
        reasons = because(node)
        steps += _rule_steps(node, [hit for n, hit in hits if n == node], reasons, forward, names)
        steps += _ipvs_steps(node, reasons, forward, names, any(s.kind == DNAT and s.node == node for s in steps))
        steps += _hairpin_steps(node, forward, names, bridge)
    steps = _ordered(steps)
    steps += _unnat_steps(hops, forward)
    return Diagnosis(tuple(steps))


def _ordered(steps: list[Step]) -> list[Step]:
    """Within a node, in the order the kernel takes them: the choice and DNAT (prerouting, or ipvs at input), the
    mark, the masquerade (postrouting), then the bridge that hairpins it."""
    order = {DNAT: 0, IPVS: 0, MARKED: 1, MASQUERADE: 2, HAIRPIN: 3}
    nodes = list(dict.fromkeys(step.node for step in steps))
    return sorted(steps, key=lambda s: (nodes.index(s.node), order.get(s.kind, 4)))


def _nodes(hits: Sequence[tuple[str, RuleHit]], hops: Sequence[Hop]) -> list[str]:
    """The actors the probe met, in path order: as the rules were read (by first sight), then any other a capture
    saw."""
    return list(dict.fromkeys([node for node, _ in hits] + [hop.actor for hop in hops]))


def _rule_steps(
    node: str, hits: list[RuleHit], reasons: PlacedReasons, forward: list[tuple[int, Hop]], names: Mapping[str, str]
) -> list[Step]:
    """The steps of one node's rules: an endpoint chosen and DNATed, a mark for masquerade, the masquerade."""
    steps: list[Step] = []
    choice: Because | None = None
    mark: Because | None = None
    for hit in hits:
        reason = reasons.reason(hit)
        if _masquerades(hit):
            setting = reason.setting if reason else (mark.setting if mark else None)
            steps.append(_masquerade(node, hit, setting, mark, forward, names))
            mark = None
            continue
        if reason is not None and reason.kind == MARK:
            mark = reason
            said = f"marked for masquerade by {rule_place(hit)}"
            steps.append(
                Step(MARKED, node, f"{hit.table} {hit.chain}", said, _rule(hit), reason.setting, _counted(hit))
            )
        elif reason is not None and reason.kind == CHOICE:
            choice = reason
        if (destination := _dnat_to(hit)) is not None:
            steps.append(_dnat(node, hit, destination or _new_destination(node, forward), choice, names))
            choice = None
    return steps


@dataclass(frozen=True)
class PlacedReasons:
    """A node's reasons indexed once for every probe: by table and chain (a node of a cluster of 10 000 endpoints
    has some 40 000, and each rule a probe met would otherwise be tried against every one), and IPVS's virtual
    servers by address. Indexed per diagnosis, a sliced import's node (120 000 reasons) spent minutes of its
    probes here."""

    placed: Mapping[tuple[str, str], Sequence[Because]]
    ipvs_servers: Mapping[str, Because]

    @classmethod
    def of(cls, reasons: Sequence[Because]) -> PlacedReasons:
        placed: dict[tuple[str, str], list[Because]] = {}
        for reason in reasons:
            placed.setdefault((reason.table, reason.chain), []).append(reason)
        servers = {b.chain.split(" ", 1)[1]: b for b in reasons if b.kind == CHOICE and b.table == "ipvs"}
        return cls(placed, servers)

    def reason(self, hit: RuleHit) -> Because | None:
        """Why the rule was written, by its table as its writer wrote in it: ip-masq-agent's, flannel's or Calico's
        rules read from the host's backend beside kube-proxy's are named with it (`iptables-legacy nat`)."""
        table = hit.written_table
        candidates = self.placed.get((table, hit.chain), ())
        return next((b for b in candidates if b.matches(table, hit.chain, hit.rule)), None)


def rule_place(hit: RuleHit) -> str:
    """`nat KUBE-EXT-…` with the rule's comment, as kube-proxy wrote it, when it has one."""
    found = _COMMENT_TEXT.search(hit.rule)
    return f"{hit.table} {hit.chain}" + (f' ("{found.group(1) or found.group(2)}")' if found else "")


def _rule(hit: RuleHit) -> str:
    return f"{hit.table} {hit.chain}: {hit.rule}"


def _counted(hit: RuleHit) -> str:
    return f"the rule met {hit.packets} packet{'s' * (hit.packets != 1)}"


def _statement(hit: RuleHit) -> str:
    """The rule's text without its comment (which may say `masquerade` of a rule that only marks)."""
    return _COMMENT.sub("", hit.rule)


def _masquerades(hit: RuleHit) -> bool:
    """A rule that rewrites the source: iptables' MASQUERADE or SNAT target, nftables' masquerade or snat."""
    return hit.verdict in ("MASQUERADE", "SNAT") or bool(_NFT_SOURCE_NAT.search(_statement(hit)))


def _dnat_to(hit: RuleHit) -> str | None:
    """Where a DNAT rule sends the packet, as the rule says it ("": a map the rule picks from), None for another
    rule."""
    if hit.verdict == "DNAT":
        found = _TO_DESTINATION.search(hit.rule)
        return found.group(1) if found else ""
    if found := _NFT_DNAT.search(_statement(hit)):
        return "" if found.group(4) == "numgen" else found.group(4)
    return None


def _dnat(node: str, hit: RuleHit, destination: str, choice: Because | None, names: Mapping[str, str]) -> Step:
    said = f"DNATed by {rule_place(hit)} to {_named(destination, names)}"
    if choice is not None:
        said += f", chosen {choice.choice} by {choice.table} {choice.chain}"
    setting = choice.setting if choice else None
    return Step(DNAT, node, f"{hit.table} {hit.chain}", said, _rule(hit), setting, _counted(hit))


def _masquerade(
    node: str,
    hit: RuleHit,
    setting: Setting | None,
    mark: Because | None,
    forward: list[tuple[int, Hop]],
    names: Mapping[str, str],
) -> Step:
    change = _source_change(node, forward)
    if change is None:
        source = "no capture shows its source before and after this node"
    elif change[0] == change[1]:
        source = f"its source {_named(change[0], names)} kept (already the node's own address)"
    else:
        source = f"source {_named(change[0], names)} became {_named(change[1], names)}"
    said = f"masqueraded by {rule_place(hit)}: {source}"
    if mark is not None:
        said += f", as marked by {mark.table} {mark.chain}"
    elif setting is None:
        said += ", no mark for it among the rules the lab read (a CNI's or ip-masq-agent's rule masquerades unmarked)"
    captures = "" if change is None else ", and the captures before and after the node"
    where = f"{hit.table} {hit.chain}"
    return Step(MASQUERADE, node, where, said, _rule(hit), setting, _counted(hit) + captures, change)


def _ipvs_steps(
    node: str, reasons: PlacedReasons, forward: list[tuple[int, Hop]], names: Mapping[str, str], dnated: bool
) -> list[Step]:
    """IPVS's forwarding on `node`: the forward packet came in to a virtual server's address and left for another
    destination, and no DNAT rule did it (the captures before and after the node show it)."""
    servers = reasons.ipvs_servers
    if dnated or not servers:
        return []
    seen = _through(node, forward, _destination_changed)
    if seen is None:
        return []
    came, left = seen
    before, after = _ends(came.packet), _ends(left.packet)
    if before is None or after is None or before[1] == after[1] or before[1] not in servers:
        return []
    server = servers[before[1]]
    said = f"forwarded by IPVS's virtual server {before[1]} to {_named(after[1], names)}, chosen {server.choice}"
    evidence = f"the captures {came.actor}/{came.ifname} in and {left.actor}/{left.ifname} out"
    return [Step(IPVS, node, f"ipvs {server.chain}", said, "", server.setting, evidence)]


def _hairpin_steps(
    node: str, forward: list[tuple[int, Hop]], names: Mapping[str, str], bridge: Bridge | None
) -> list[Step]:
    """The forward packet sent back out of the bridge port it came in by, on `node`: a hairpin, which the
    captures on that port show (in, then out)."""
    seen = _through(node, forward, lambda came, left: came.ifname == left.ifname)
    if bridge is None or seen is None or seen[0].ifname not in bridge.ports or seen[1].ifname != seen[0].ifname:
        return []
    ends = _ends(seen[1].packet)
    source = f", from {_named(ends[0], names)}" if ends else ""
    said = f"sent back out of {seen[0].ifname}, the {bridge.name} port it came in by{source}"
    evidence = f"the captures {node}/{seen[0].ifname} in and out"
    return [Step(HAIRPIN, node, bridge.name, said, "", bridge.hairpin, evidence)]


def _unnat_steps(hops: Sequence[Hop], forward: list[tuple[int, Hop]]) -> list[Step]:
    """The reply's addresses restored on a node (conntrack's reverse NAT): a reply that came into a node and left it
    with other addresses, as the captures show."""
    going = {index for index, _ in forward}
    replies = [(i, hop) for i, hop in enumerate(hops) if i not in going]
    steps = []
    for i, came in replies:
        if came.outgoing:
            continue
        left = next((hop for j, hop in replies if j > i and hop.actor == came.actor and hop.outgoing), None)
        if left is None or _addresses(left.packet) == _addresses(came.packet):
            continue
        said = f"reply un-NATed by conntrack: {_addresses(came.packet)} became {_addresses(left.packet)}"
        evidence = f"the captures {came.actor}/{came.ifname} in and {left.actor}/{left.ifname} out"
        steps.append(Step(UNNAT, came.actor, "conntrack", said, "", None, evidence))
    return steps


def _forward(hops: Sequence[Hop]) -> list[tuple[int, Hop]]:
    """The hops of the forward direction (with their place in `hops`): each pair of addresses is first seen going
    the way the connection was opened; a hop with those addresses reversed is a reply, one the same way (a later
    segment of the client's) is forward."""
    first: dict[frozenset[str], tuple[str, str]] = {}
    forward = []
    for index, hop in enumerate(hops):
        ends = _ends(hop.packet)
        if ends is not None and first.setdefault(frozenset(ends), ends) == ends:
            forward.append((index, hop))
    return forward


def _passes(node: str, forward: list[tuple[int, Hop]]) -> list[tuple[Hop, Hop]]:
    """Each time the forward packet came into `node` and next left it (a packet may cross a node twice)."""
    passes = []
    for i, came in forward:
        if came.actor == node and not came.outgoing:
            left = next((hop for j, hop in forward if j > i and hop.actor == node and hop.outgoing), None)
            if left is not None:
                passes.append((came, left))
    return passes


def _through(node: str, forward: list[tuple[int, Hop]], changed: Callable[[Hop, Hop], bool]) -> tuple[Hop, Hop] | None:
    """The forward packet as it came into `node` and next left it: the first pass where `changed` holds, else
    the first pass (the node's rules counted every pass together)."""
    passes = _passes(node, forward)
    return next((p for p in passes if changed(*p)), passes[0] if passes else None)


def _source_changed(came: Hop, left: Hop) -> bool:
    before, after = _ends(came.packet), _ends(left.packet)
    return before is not None and after is not None and _host(before[0]) != _host(after[0])


def _destination_changed(came: Hop, left: Hop) -> bool:
    before, after = _ends(came.packet), _ends(left.packet)
    return before is not None and after is not None and before[1] != after[1]


def _source_change(node: str, forward: list[tuple[int, Hop]]) -> tuple[str, str] | None:
    """The forward packet's source address as it came into `node` and as it left, when captures saw both."""
    seen = _through(node, forward, _source_changed)
    if seen is None:
        return None
    before, after = _ends(seen[0].packet), _ends(seen[1].packet)
    return (_host(before[0]), _host(after[0])) if before and after else None


def _new_destination(node: str, forward: list[tuple[int, Hop]]) -> str:
    """Where the forward packet left `node` for, when the DNAT rule picked it from a map."""
    seen = _through(node, forward, _destination_changed)
    ends = _ends(seen[1].packet) if seen else None
    return ends[1] if ends else "an endpoint no capture saw"


def _ends(packet: str) -> tuple[str, str] | None:
    """A hop's source and destination as written (`ip:port`, or `ip` without ports)."""
    source, arrow, rest = packet.partition(" > ")
    return (source, rest.split(" ", 1)[0]) if arrow and source else None


def _addresses(packet: str) -> str:
    ends = _ends(packet)
    return f"{ends[0]} > {ends[1]}" if ends else packet


def _host(address: str) -> str:
    """An address without its port."""
    try:
        return host_port(address)[0]
    except ValueError:
        return address


def _named(address: str, names: Mapping[str, str]) -> str:
    name = names.get(_host(address))
    return f"{address} ({name})" if name else address
