"""`lab diff FILE --node N --rules DUMP ...`: read and review the dumps, pick the scenario's variant, compare."""

from __future__ import annotations

import argparse
import shlex

from lab.describe.load import Scenario
from lab.describe.topology import Topology
from lab.install.tools import InstallError
from lab.replay.diff.nodediff import Dumps, NodeDiff, diff_node, with_release
from lab.replay.dump import DumpError
from lab.replay.review import review_ipsets, review_iptables, review_nft
from lab.replay.run import read
from lab.selection import load_all, no_variant, select

_OPTION = {"rules": "--rules", "nft": "--nft", "ipsets": "--ipsets", "ipvs": "--ipvs"}


def _dumps(args: argparse.Namespace) -> Dumps:
    dumps = Dumps(
        rules=read("--rules", args.rules),
        nft=read("--nft", args.nft),
        ipsets=read("--ipsets", args.ipsets),
        ipvs=read("--ipvs", args.ipvs),
    )
    if dumps.nft is not None and (args.rules or args.ipsets or args.ipvs):
        raise InstallError(
            "--nft is a node in nftables mode: give it alone (--rules, --ipsets and --ipvs are iptables "
            "and ipvs mode's dumps)"
        )
    if dumps.nft is None and dumps.rules is None and dumps.ipsets is None and dumps.ipvs is None:
        raise InstallError(
            "no dump: give --rules (iptables-save), --nft (nft list ruleset), or ipvs mode's --rules, "
            "--ipsets (ipset save) and --ipvs (ipvsadm -Sn or -Ln)"
        )
    for review, text in ((review_iptables, dumps.rules), (review_nft, dumps.nft), (review_ipsets, dumps.ipsets)):
        if text is not None:
            review(text)
    return dumps


def _variant(args: argparse.Namespace, scenario: Scenario, dumps: Dumps) -> tuple[Topology, str]:
    """The variant to render: the first --variant picks whose mode is the dumps'; else the first, in their mode."""
    variants = select(scenario, args.variant)
    if not variants:
        raise InstallError(no_variant([scenario], args.variant))
    if args.node not in {n.name for n in variants[0].nodes}:
        nodes = ", ".join(n.name for n in variants[0].nodes)
        raise InstallError(f"{args.file}: no node {args.node!r}; nodes are {nodes}")
    mode = dumps.mode(variants[0].cluster.proxy_mode)
    same = [t for t in variants if t.cluster.proxy_mode == mode]
    if same:
        return same[0], ""
    topo = variants[0]
    note = (
        f"the scenario's kube-proxy runs in {topo.cluster.proxy_mode} mode; the dumps are {mode} mode's: compared "
        f"with what kube-proxy {topo.cluster.kube_version} writes in {mode} mode"
    )
    return with_release(topo, mode, topo.cluster.kube_version), note


def replay_hint(args: argparse.Namespace, topo: Topology) -> str:
    node = topo.node(args.node)
    dumps = [f"{_OPTION[kind]} {shlex.quote(getattr(args, kind))}" for kind in _OPTION if getattr(args, kind)]
    pod_cidr = f" --pod-cidr {node.pod_cidr}" if node.pod_cidr else ""
    return f"lab replay {' '.join(dumps)} --node-ip {node.ip}{pod_cidr} --from SRC_IP --to DST_IP:PORT"


def diff_from_args(args: argparse.Namespace) -> tuple[NodeDiff, str, str]:
    """The comparison, a note when the scenario's mode is not the dumps', and the `lab replay` command to follow."""
    try:
        dumps = _dumps(args)
        topo, note = _variant(args, load_all([args.file], args.matrix)[0], dumps)
        return diff_node(topo, args.node, dumps), note, replay_hint(args, topo)
    except DumpError as exc:
        where = f"{_OPTION[exc.dump]} {getattr(args, exc.dump)}" + (f" line {exc.line}" if exc.line else "")
        raise InstallError(f"{where}: {exc.reason}") from None
