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

_OPTION = {"rules": "--rules", "rules6": "--rules6", "nft": "--nft", "ipsets": "--ipsets", "ipvs": "--ipvs"}


def _dumps(args: argparse.Namespace) -> Dumps:
    dumps = Dumps(
        rules=read("--rules", args.rules),
        rules6=read("--rules6", args.rules6),
        nft=read("--nft", args.nft),
        ipsets=read("--ipsets", args.ipsets),
        ipvs=read("--ipvs", args.ipvs),
    )
    if dumps.nft is not None and (args.rules or args.rules6 or args.ipsets or args.ipvs):
        raise InstallError(
            "--nft is a node in nftables mode: give it alone (--rules, --rules6, --ipsets and --ipvs are iptables "
            "and ipvs mode's dumps)"
        )
    if all(text is None for text in (dumps.nft, dumps.rules, dumps.rules6, dumps.ipsets, dumps.ipvs)):
        raise InstallError(
            "no dump: give --rules (iptables-save) and/or --rules6 (ip6tables-save), --nft (nft list ruleset), or "
            "ipvs mode's --rules, --ipsets (ipset save) and --ipvs (ipvsadm -Sn or -Ln)"
        )
    for option, text in (("rules", dumps.rules), ("rules6", dumps.rules6)):
        if text is not None:
            review_iptables(text, option)
    for review, text in ((review_nft, dumps.nft), (review_ipsets, dumps.ipsets)):
        if text is not None:
            review(text)
    dumps.xtables()  # each family's dump checked for addresses of the other family, before anything is rendered
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
    """The `lab replay` command for the same dumps: the node's addresses and pod CIDRs of every family. Every value
    is shell-quoted, so that the command pastes as it reads whatever a file name or the scenario holds."""
    node = topo.node(args.node)
    words = ["lab", "replay"]
    words += [word for kind in _OPTION if getattr(args, kind) for word in (_OPTION[kind], getattr(args, kind))]
    words += [word for ip in (node.ip, node.secondary_ip) if ip for word in ("--node-ip", ip)]
    words += [word for cidr in (node.pod_cidr, node.secondary_pod_cidr) if cidr for word in ("--pod-cidr", cidr)]
    return shlex.join([*words, "--from", "SRC_IP", "--to", "DST_IP:PORT"])


def diff_from_args(args: argparse.Namespace) -> tuple[NodeDiff, str, str]:
    """The comparison, a note when the scenario's mode is not the dumps', and the `lab replay` command to follow."""
    try:
        dumps = _dumps(args)
        topo, note = _variant(args, load_all([args.file], args.matrix)[0], dumps)
        return diff_node(topo, args.node, dumps), note, replay_hint(args, topo)
    except DumpError as exc:
        where = f"{_OPTION[exc.dump]} {getattr(args, exc.dump)}" + (f" line {exc.line}" if exc.line else "")
        raise InstallError(f"{where}: {exc.reason}") from None
