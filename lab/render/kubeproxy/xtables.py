"""What kube-proxy's iptables and ipvs modes both write with iptables: the jump rules kept in built-in chains,
kubelet's rules beside them, the fixed KUBE-POSTROUTING / KUBE-MARK-MASQ / KUBE-FORWARD rules, and the one
iptables-restore text that loads a whole node into an empty network namespace."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from lab.render.kubeproxy.versions import Release

KUBE_POSTROUTING = "KUBE-POSTROUTING"
KUBE_MARK_MASQ = "KUBE-MARK-MASQ"
KUBE_MARK_DROP = "KUBE-MARK-DROP"
KUBE_FORWARD = "KUBE-FORWARD"
KUBE_FIREWALL = "KUBE-FIREWALL"

# kubelet's --iptables-drop-bit default (15), formatted like getIPTablesMark ("%#08x").
KUBELET_DROP_MARK = "0x00008000"

BUILTIN_CHAINS = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
}


@dataclass(frozen=True)
class JumpRule:
    """A rule kept in a built-in chain with `iptables -t TABLE -I CHAIN 1 ARGS`."""

    table: str
    chain: str
    target: str
    comment: str = ""
    extra_args: tuple[str, ...] = ()

    @property
    def args(self) -> str:
        """The rule as iptables-restore reads it, without "-A CHAIN"."""
        comment = comment_match(self.comment) if self.comment else ()
        return join((*self.extra_args, *comment, "-j", self.target))


@dataclass(frozen=True)
class KubeletRules:
    """What kubelet's syncIPTablesRules (pkg/kubelet/kubelet_network_linux.go) adds on a node and
    kube-proxy's restore leaves alone: KUBE-MARK-DROP, which kube-proxy up to 1.24 jumps to, and
    filter KUBE-FIREWALL, which drops those marked packets (INPUT and OUTPUT only) and
    martian 127/8 traffic. (kubelet's KUBE-MARK-MASQ / KUBE-POSTROUTING are left out: kube-proxy
    declares those chains, so its restore replaces kubelet's identical rules.)"""

    filter_chains: tuple[str, ...]
    filter_rules: tuple[str, ...]
    nat_chains: tuple[str, ...]
    nat_rules: tuple[str, ...]
    jump_rules: tuple[JumpRule, ...]

    def chains(self, table: str) -> tuple[str, ...]:
        return {"filter": self.filter_chains, "nat": self.nat_chains}[table]

    def rules(self, table: str) -> tuple[str, ...]:
        return {"filter": self.filter_rules, "nat": self.nat_rules}[table]


def kubelet_rules(version: str, ownership_cleanup: bool | None = None, family: str = "IPv4") -> KubeletRules | None:
    """kubelet's rules of that version, or None when its IPTablesOwnershipCleanup gate leaves only the hint
    chain and a copy of kube-proxy's own localnet rule (Release.kubelet_ownership_cleanup). In ip6tables it
    writes no localnet rule: "if !iptClient.IsIPv6() { // ipv6 doesn't have this issue" (pkg/kubelet/
    kubelet_network_linux.go)."""
    release = Release.of(version)
    if release.kubelet_ownership_cleanup(ownership_cleanup):
        return None
    mark_drop = join(
        ("-A", KUBE_FIREWALL, *comment_match("kubernetes firewall for dropping marked packets"))
        + ("-m", "mark", "--mark", f"{KUBELET_DROP_MARK}/{KUBELET_DROP_MARK}", "-j", "DROP")
    )
    # The #90259 mitigation (1.19); kubelet spells the addresses --dst/--src.
    localnet = join(
        ("-A", KUBE_FIREWALL, *comment_match("block incoming localnet connections"))
        + ("--dst", "127.0.0.0/8", "!", "--src", "127.0.0.0/8")
        + ("-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
    )
    firewall = (localnet, mark_drop) if release.kubelet_localnet_rule_first else (mark_drop, localnet)
    firewall = firewall if family == "IPv4" else (mark_drop,)
    return KubeletRules(
        filter_chains=(KUBE_FIREWALL,),
        filter_rules=firewall,
        nat_chains=(KUBE_MARK_DROP,),
        nat_rules=(f"-A {KUBE_MARK_DROP} -j MARK --or-mark {KUBELET_DROP_MARK}",),
        jump_rules=(
            JumpRule("filter", "OUTPUT", KUBE_FIREWALL),
            JumpRule("filter", "INPUT", KUBE_FIREWALL),
            JumpRule("nat", "POSTROUTING", KUBE_POSTROUTING, "kubernetes postrouting rules"),
        ),
    )


@dataclass(frozen=True)
class Table:
    """One table of kube-proxy's iptables-restore payload: chain declarations and rules."""

    name: str
    chains: tuple[str, ...]
    rules: tuple[str, ...]

    def payload(self) -> str:
        """This table as syncProxyRules writes it for iptables-restore --noflush."""
        return "".join(
            [
                f"*{self.name}\n",
                *(f":{chain} - [0:0]\n" for chain in self.chains),
                *(f"{rule}\n" for rule in self.rules),
                "COMMIT\n",
            ]
        )


class XtablesPayload:
    """What a mode's rendered rules offer from their filter and nat tables (fields of the dataclass that
    subclasses this): the --noflush payload and the built-in chains' jumps."""

    table_order: ClassVar[tuple[str, str]]  # the order syncProxyRules writes the tables in
    filter_chains: tuple[str, ...]
    filter_rules: tuple[str, ...]
    nat_chains: tuple[str, ...]
    nat_rules: tuple[str, ...]
    jump_rules: tuple[JumpRule, ...]
    kubelet: KubeletRules | None

    @property
    def tables(self) -> tuple[Table, ...]:
        return tuple(
            Table(name, getattr(self, f"{name}_chains"), getattr(self, f"{name}_rules")) for name in self.table_order
        )

    @property
    def kube_proxy_payload(self) -> str:
        """The exact iptables-restore input of a full syncProxyRules() (loaded with --noflush)."""
        return "".join(table.payload() for table in self.tables)

    def builtin_rules(self, table: str, chain: str) -> list[str]:
        """The jump rules of one built-in chain, top first, as they stand on a fresh node."""
        return builtin_rules(self.jump_rules, self.kubelet, table, chain)


def builtin_rules(jumps: Sequence[JumpRule], kubelet: KubeletRules | None, table: str, chain: str) -> list[str]:
    """The jump rules of one built-in chain, top first, as they stand on a fresh node: kubelet starts first, so
    kube-proxy's `-I ... 1` rules end up above kubelet's, each set in reverse order."""
    ours = [jump for jump in jumps if (jump.table, jump.chain) == (table, chain)]
    theirs = [
        jump
        for jump in (kubelet.jump_rules if kubelet else ())
        if (jump.table, jump.chain) == (table, chain) and jump not in ours
    ]
    return [f"-A {chain} {jump.args}" for jump in [*reversed(ours), *reversed(theirs)]]


def restore_text(
    tables: Sequence[Table],
    jumps: Sequence[JumpRule],
    kubelet: KubeletRules | None,
    ensured: Sequence[tuple[str, str]] = (),
) -> str:
    """One iptables-restore input (without --noflush) for an empty network namespace: built-in chains with
    policy ACCEPT, the jumps in the order the `-I` calls leave them, kube-proxy's chains and rules, and where
    kube-proxy relies on them kubelet's chains and rules. Chains that are only created (jump targets,
    `ensured` (table, chain) pairs) are declared empty."""
    lines = []
    for table in tables:
        builtins = BUILTIN_CHAINS[table.name]
        kubelet_chains = kubelet.chains(table.name) if kubelet else ()
        kubelet_table_rules = kubelet.rules(table.name) if kubelet else ()
        created = [
            jump.target for jump in [*jumps, *(kubelet.jump_rules if kubelet else ())] if jump.table == table.name
        ]
        created += [chain for ensured_table, chain in ensured if ensured_table == table.name]
        lines.append(f"*{table.name}")
        lines += [f":{chain} ACCEPT [0:0]" for chain in builtins]
        lines += [f":{chain} - [0:0]" for chain in dict.fromkeys([*table.chains, *kubelet_chains, *created])]
        lines += [rule for chain in builtins for rule in builtin_rules(jumps, kubelet, table.name, chain)]
        # kubelet re-adds (iptables -C / -A) whatever a kube-proxy restore flushed, unless an equivalent rule is
        # already there.
        present = {_kubelet_spelling(rule) for rule in table.rules} if kubelet_table_rules else set()
        lines += [*table.rules, *(rule for rule in kubelet_table_rules if _kubelet_spelling(rule) not in present)]
        lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def postrouting_rules(mark: str, random_fully: bool) -> list[str]:
    """KUBE-POSTROUTING: masquerade what KUBE-MARK-MASQ marked. The mark is cleared first so that a packet that
    loops through the stack again is not masqueraded twice."""
    fully = ("--random-fully",) if random_fully else ()
    return [
        join(("-A", KUBE_POSTROUTING, "-m", "mark", "!", "--mark", f"{mark}/{mark}", "-j", "RETURN")),
        join(("-A", KUBE_POSTROUTING, "-j", "MARK", "--xor-mark", mark)),
        join(
            ("-A", KUBE_POSTROUTING, *comment_match("kubernetes service traffic requiring SNAT"), "-j", "MASQUERADE")
            + fully
        ),
    ]


def mark_masq_rule(mark: str) -> str:
    return join(("-A", KUBE_MARK_MASQ, "-j", "MARK", "--or-mark", mark))


def forward_accept_rules(mark: str, release: Release) -> list[str]:
    """KUBE-FORWARD's accepts: marked traffic (and what follows it) passes even when the FORWARD policy is
    DROP."""
    marked = ("-m", "mark", "--mark", f"{mark}/{mark}")
    rules = [join(("-A", KUBE_FORWARD, *comment_match("kubernetes forwarding rules"), *marked, "-j", "ACCEPT"))]
    established = ("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
    which = ("pod source ", "pod destination ") if release.split_forward_conntrack_rules else ("",)
    for part in which:
        rules.append(
            join(("-A", KUBE_FORWARD, *comment_match(f"kubernetes forwarding conntrack {part}rule"), *established))
        )
    return rules


def comment_match(text: str) -> tuple[str, ...]:
    return ("-m", "comment", "--comment", quoted(text))


def quoted(text: str) -> str:
    return f'"{text}"'


def join(parts: Iterable[str]) -> str:
    return " ".join(parts)


def flatten(parts: Iterable[str | Iterable[str]]) -> list[str]:
    flat: list[str] = []
    for part in parts:
        if isinstance(part, str):
            flat.append(part)
        else:
            flat += flatten(part)
    return flat


def _kubelet_spelling(rule: str) -> str:
    """kubelet writes --dst/--src where kube-proxy writes -d/-s; iptables -C treats them alike."""
    return rule.replace(" --dst ", " -d ").replace(" --src ", " -s ")
