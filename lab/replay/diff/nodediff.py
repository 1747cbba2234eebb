"""`lab diff`'s answer: a node's dumps against what kube-proxy of the scenario's release writes on that node
(render's output), and, when they differ, which release's output the dumps match best. Pure: texts in, a
NodeDiff out; the dumps were reviewed (lab.replay.review) before they get here."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lab.describe.releases import IPTABLES_VERSIONS
from lab.describe.topology import Topology
from lab.render.dataplane import NodeDataplane, node_dataplane
from lab.render.kubeproxy.nftables import NFTABLES_VERSIONS
from lab.replay.diff.compare import PartDiff, compare
from lab.replay.diff.parts import Side, iptables_side, ipvs_side, merge, nft_side
from lab.replay.families import SAVE_TOOL, XtablesDump, xtables_dumps


@dataclass(frozen=True)
class Dumps:
    """A node's dumps, as given (None: not given). ipvs mode compares the parts given."""

    rules: str | None = None  # iptables-save (a dual-stack node's ip6tables-save may follow, after its header)
    nft: str | None = None  # nft list ruleset (a dual-stack node's: both kube-proxy tables)
    ipsets: str | None = None  # ipset save
    ipvs: str | None = None  # ipvsadm -Sn or -Ln
    rules6: str | None = None  # ip6tables-save

    def xtables(self) -> dict[int, XtablesDump]:
        """Each family's xtables dump given ({4: iptables-save's, 6: ip6tables-save's})."""
        return xtables_dumps(self.rules, self.rules6)

    def mode(self, scenario_mode: str) -> str:
        """The proxy mode that wrote these dumps: nft → nftables; ipsets or ipvs servers → ipvs; an iptables-save
        alone → ipvs if kube-proxy's rules match its KUBE-CLUSTER-IP set, iptables if it has KUBE-SVC chains, else the
        scenario's."""
        if self.nft is not None:
            return "nftables"
        if self.ipsets is not None or self.ipvs is not None:
            return "ipvs"
        rules = (self.rules or "") + (self.rules6 or "")
        if "--match-set KUBE-CLUSTER-IP " in rules:
            return "ipvs"
        if ":KUBE-SVC-" in rules or (":KUBE-SERVICES" in rules and scenario_mode != "ipvs"):
            return "iptables"
        return scenario_mode

    def side(self, mode: str) -> Side:
        if mode == "nftables":
            return nft_side(self.nft or "")
        rules = merge(iptables_side(d.text, mode, d.dump, version) for version, d in self.xtables().items())
        if mode == "ipvs":
            return merge([rules, ipvs_side(self.ipsets, self.ipvs)])
        return rules


def rendered(plane: NodeDataplane, given: Dumps) -> Dumps:
    """Render's output as the dumps a node of that mode would give, only of the kinds (and, in iptables and ipvs
    modes, of the families) the user gave. Each family's proxier is its own plane (kube-proxy runs one each); a
    dual-stack ipvs node's two proxiers share the one `ipset save` (the IPv6 one's sets are `KUBE-6-...`) and the
    one IPVS table."""
    planes = {int(p.family[-1]): p for p in (plane, plane.other_family) if p is not None}
    if plane.mode == "nftables":
        return Dumps(nft="".join(p.nft for p in planes.values()))
    families = given.xtables()
    v4, v6 = planes.get(4), planes.get(6)
    return Dumps(
        rules=v4.iptables if v4 and 4 in families else None,
        rules6=v6.iptables if v6 and 6 in families else None,
        ipsets="".join(p.ipsets for p in planes.values()) if given.ipsets is not None else None,
        ipvs="".join(p.ipvs for p in planes.values()) if given.ipvs is not None else None,
    )


def _not_given(topo: Topology, dumps: Dumps, mode: str) -> tuple[str, ...]:
    """A proxier of the node (one per family of the cluster) whose xtables dump was not given, said so (in nftables
    mode one ruleset holds both)."""
    if mode == "nftables" or (dumps.rules is None and dumps.rules6 is None):
        return ()
    given = dumps.xtables()
    versions = {family: int(family[-1]) for family in topo.cluster.families}
    return tuple(f"{f} (no {SAVE_TOOL[v]} dump given)" for f, v in versions.items() if v not in given)


@dataclass(frozen=True)
class Match:
    version: str
    differences: int


@dataclass(frozen=True)
class NodeDiff:
    node: str
    mode: str
    version: str
    differences: tuple[PartDiff, ...]
    others: tuple[str, ...]  # what the dumps hold that is not kube-proxy's
    # When the dumps differ, and another release's output they match better: the releases they match best, and the
    # scenario's release scored alike (entries missing or extra; a changed one counts as both).
    best: tuple[Match, ...] = ()
    own: Match | None = None
    # A proxier of the node (one per family) not compared, for want of its dump: "IPv6 (no ip6tables-save dump given)".
    families_not_compared: tuple[str, ...] = ()

    @property
    def identical(self) -> bool:
        return not self.differences

    @property
    def count(self) -> int:
        return sum(d.count for d in self.differences)

    def as_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "proxyMode": self.mode,
            "kubeVersion": self.version,
            "identical": self.identical,
            "differences": self.count,
            "parts": [d.as_json() for d in self.differences],
            "not_compared": list(self.others),
            "families_not_compared": list(self.families_not_compared),
            # Entries missing or extra (a changed one counts as both), against the best releases and the scenario's.
            "best_match": [{"kubeVersion": m.version, "differing_entries": m.differences} for m in self.best],
            "scenario_release": {"kubeVersion": self.own.version, "differing_entries": self.own.differences}
            if self.own
            else None,
        }


def with_release(topo: Topology, mode: str, version: str) -> Topology:
    return replace(topo, cluster=replace(topo.cluster, proxy_mode=mode, kube_version=version))


def _against(
    topo: Topology, node: str, dumps: Dumps, found: Side, mode: str, version: str, pair: bool = True
) -> list[PartDiff]:
    plane = node_dataplane(with_release(topo, mode, version), node)
    return compare(rendered(plane, dumps).side(mode), found, pair)


def _best(topo: Topology, node: str, dumps: Dumps, found: Side, mode: str) -> tuple[tuple[Match, ...], Match | None]:
    """The releases whose output the dumps match with fewer differences than the scenario's, if any, and the
    scenario's. Ranked by entries missing or extra (a changed one counts as both), weighing no likeness."""
    counts = {}
    for version in NFTABLES_VERSIONS if mode == "nftables" else IPTABLES_VERSIONS:
        try:
            diffs = _against(topo, node, dumps, found, mode, version, pair=False)
        except ValueError:  # render refuses this scenario for that release (an option it did not have)
            continue
        counts[version] = Match(version, sum(d.count for d in diffs))
    own = counts.get(topo.cluster.kube_version, Match(topo.cluster.kube_version, 0))
    fewest = min(m.differences for m in counts.values())
    better = [m for m in counts.values() if m.differences == fewest] if fewest < own.differences else []
    return (tuple(better), own) if better else ((), None)


def diff_node(topo: Topology, node: str, dumps: Dumps) -> NodeDiff:
    """The dumps of `node` against what kube-proxy of the topology's release writes there."""
    mode = dumps.mode(topo.cluster.proxy_mode)
    found = dumps.side(mode)
    differences = _against(topo, node, dumps, found, mode, topo.cluster.kube_version)
    best, own = _best(topo, node, dumps, found, mode) if differences else ((), None)
    not_given = _not_given(topo, dumps, mode)
    return NodeDiff(node, mode, topo.cluster.kube_version, tuple(differences), found.others, best, own, not_given)
