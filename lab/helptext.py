"""Words that several commands' --help share: what --variant and --matrix take, and how an exit status reads."""

from __future__ import annotations

# Completes "run only the variants ...", "build the first variant ...".
VARIANT = (
    "whose matrix value of KEY is VALUE (e.g. proxyMode=ipvs, kubeVersion=1.31, masqueradeAll=true); repeat it for "
    "other keys, each key once"
)
MATRIX = "add an axis to the matrix or replace one: KEY=V1,V2, e.g. proxyMode=iptables,nftables; each key once"
# What every command that builds namespaces does when it is stopped: they are removed first.
STOPPED = ((130, "interrupted (Ctrl-C)"), (143, "terminated (SIGTERM)"))
# The exit status of a run that tested nothing: every probe skipped (lab run; --allow-skips accepts it), or a live
# lab's probe the machine could not judge (an affinity probe too slow to show it, lab/judge/attempts.py).
NOTHING_TESTED = 3


def exit_codes(*codes: tuple[int, str]) -> str:
    """An epilog listing a command's exit statuses."""
    return "exit status: " + "; ".join(f"{code} {meaning}" for code, meaning in codes) + "."


# lab diff's description: what it compares, in which form, and what it leaves out.
DIFF = (
    "Compare a node's real kube-proxy rules with what kube-proxy of the scenario's release and mode writes on that "
    "node for the scenario's objects as it starts, before any step (what lab render prints), and list per chain the "
    "rules missing from the node, "
    "the extra ones, the changed ones (a missing and an extra rule mostly alike) and, where kube-proxy's order "
    "matters, rules out of order. Dumps: --rules (iptables-save) and --rules6 (ip6tables-save, or after it in the "
    "same file) for iptables mode, each family's proxier compared with its own; --rules, --ipsets and --ipvs "
    "(any of them) for ipvs mode; --nft for nftables mode (the ip and ip6 kube-proxy tables); the mode is the "
    "dumps', the variant the first whose "
    "proxyMode is theirs. Both sides are read in one form: counters dropped; matches in any order, addresses, marks "
    "and probabilities as the kernel stores them; hash-named chains (KUBE-SVC-..., KUBE-SEP-..., nftables' "
    "service-HASH-...) named by the Service port and endpoint they stand for, so another release's or other "
    "endpoints' chains line up; ipset members and ipvs virtual and real servers as sets; rule order ignored only in "
    "the chains where each rule matches its own destinations (KUBE-SERVICES, KUBE-NODEPORTS, "
    "KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL of iptables mode; NodePorts' jump still last). Only kube-proxy's "
    "chains, sets and table are compared; the rest (a CNI's) is listed in one line. When the dumps differ, every "
    "release the lab reproduces is rendered and the ones the dumps match best are named. The report ends with the lab "
    "replay command that shows what a packet does on the same dumps. Each dump is reviewed as lab replay reviews it; "
    "builds nothing, needs no root. docs/diff.md says which orders matter and why."
)
