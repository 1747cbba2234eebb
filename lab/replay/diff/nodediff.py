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


@dataclass(frozen=True)
class Dumps:
    """A node's dumps, as given (None: not given). ipvs mode compares the parts given."""

    rules: str | None = None  # iptables-save
    nft: str | None = None  # nft list ruleset
    ipsets: str | None = None  # ipset save
    ipvs: str | None = None  # ipvsadm -Sn or -Ln

    def mode(self, scenario_mode: str) -> str:
        """The proxy mode that wrote these dumps: nft → nftables; ipsets or ipvs servers → ipvs; an iptables-save
        alone → ipvs if kube-proxy's rules match its KUBE-CLUSTER-IP set, iptables if it has KUBE-SVC chains, else the
        scenario's."""
        if self.nft is not None:
            return "nftables"
        if self.ipsets is not None or self.ipvs is not None:
            return "ipvs"
        rules = self.rules or ""
        if "--match-set KUBE-CLUSTER-IP " in rules:
            return "ipvs"
        if ":KUBE-SVC-" in rules or (":KUBE-SERVICES" in rules and scenario_mode != "ipvs"):
            return "iptables"
        return scenario_mode

    def side(self, mode: str) -> Side:
        if mode == "nftables":
            return nft_side(self.nft or "")
        rules = iptables_side(self.rules or "", mode) if self.rules is not None else Side({}, ())
        if mode == "ipvs":
            return merge([rules, ipvs_side(self.ipsets, self.ipvs)])
        return rules


def rendered(plane: NodeDataplane, given: Dumps) -> Dumps:
    """Render's output as the dumps a node of that mode would give, only of the kinds the user gave."""
    if plane.mode == "nftables":
        return Dumps(nft=plane.nft)
    return Dumps(
        rules=plane.iptables if given.rules is not None else None,
        ipsets=plane.ipsets if given.ipsets is not None else None,
        ipvs=plane.ipvs if given.ipvs is not None else None,
    )


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
    return NodeDiff(node, mode, topo.cluster.kube_version, tuple(differences), found.others, best, own)
