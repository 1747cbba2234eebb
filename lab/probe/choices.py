"""Among how many endpoints the load balancing that picked a connection's endpoint chose: its spread. A probe that
does not give `attempts` sends connections until it has reached every one of them (lab/judge/attempts.py), and
`lab replay` does the same, so that which endpoint the draw gave never decides a verdict.

Each proxy mode writes the choice its own way, and the rules the connection met say which rule made it:
iptables' service chain (KUBE-SVC-*, KUBE-SVL-*) jumps to one KUBE-SEP-* chain per endpoint, all but the last
behind `-m statistic --mode random`, after ClientIP affinity's `--rcheck` jumps to the same chains
(writeServiceToEndpointRules in kubernetes/kubernetes pkg/proxy/iptables/proxier.go at
531be81208e2274ef42e72525a26610a9622bcdf), so that chain's jumps are the choices; nftables' service chain picks
with `numgen random mod N` (a vmap of endpoint chains, or from 1.36 a map of endpoint addresses, as
lab/render/kubeproxy/nftables.py writes them); IPVS's virtual server for the destination lists its real servers,
of which those of weight 0 (terminating endpoints, lab/render/kubeproxy/ipvs.py) take no new connection.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from lab.describe.families import Family, endpoint
from lab.describe.topology import ProbeSpec
from lab.install.tools import run_command
from lab.probe.evidence.base import RuleHit
from lab.probe.observation import Observation

# A probe that reaches every endpoint misses one the draw can give in fewer than one run in this many.
MISSED = 1e6
SEP = "KUBE-SEP-"  # iptables: one endpoint's chain
NFT_ENDPOINT = "endpoint-"  # nftables: one endpoint's chain
_NUMGEN = re.compile(r"\bnumgen (?:random|inc) mod (\d+)\b")
# `-a -t 10.96.0.10:80 -r 10.244.1.2:80 -m -w 1`, as `ipvsadm -Sn` writes a real server.
_REAL_SERVER = re.compile(r"^-a -([tu]) (\S+) -r \S+ .*-w (\d+)")


def enough_attempts(spread: int) -> int:
    """Connections after which an endpoint the draw gives one time in `spread` has been missed in fewer than one
    run in MISSED: spread * (1 - 1/spread)^n < 1/MISSED. Each connection's draw is its own (iptables' statistic and
    nftables' numgen are random; IPVS's round robin takes each real server in turn, and needs only `spread`)."""
    return math.ceil(math.log(spread * MISSED) / -math.log1p(-1 / spread)) if spread > 1 else 1


def numgen_spread(hits: Iterable[RuleHit]) -> int:
    """nftables: N of the first `numgen random mod N` among the rules met (1: none chose)."""
    return next((int(m.group(1)) for h in hits if (m := _NUMGEN.search(h.rule))), 1)


def picking_chain(hit: RuleHit) -> str | None:
    """iptables: the chain of a rule that drew among endpoints (behind `-m statistic`, or a jump to an endpoint's
    chain from another chain: the last choice has no statistic), or None."""
    drew = "-m statistic" in hit.rule or (hit.verdict.startswith(SEP) and not hit.chain.startswith(SEP))
    return hit.chain if drew else None


def jump_choices(save_text: str, chain: str) -> frozenset[str]:
    """The choices of `chain`, as iptables-save prints its rules: each endpoint chain it jumps to (ClientIP
    affinity's `--rcheck` rules jump to the same ones), and each other rule behind `-m statistic` (an edited
    dump's draw that drops, say)."""
    choices = set()
    for line in save_text.splitlines():
        if not line.startswith(f"-A {chain} "):
            continue
        if match := re.search(rf"-j ({SEP}\S+)", line):
            choices.add(match.group(1))
        elif "-m statistic" in line:
            choices.add(line)
    return frozenset(choices)


def ipvs_spread(saved: str, protocol: str, dst_ip: str, dst_port: int) -> int:
    """IPVS: the real servers of weight above 0 of the virtual server for the destination, in `ipvsadm -Sn`'s
    lines (1 when it has none: nothing was chosen)."""
    flag, address = "t" if protocol.upper() == "TCP" else "u", endpoint(dst_ip, dst_port)
    servers = [m for line in saved.splitlines() if (m := _REAL_SERVER.match(line.strip()))]
    return max(1, sum(1 for m in servers if m.group(1) == flag and m.group(2) == address and int(m.group(3)) > 0))


def endpoint_chains(hits: Iterable[RuleHit]) -> tuple[str, ...]:
    """The endpoint chains a connection's rules passed through (KUBE-SEP-*, nftables' endpoint-*): which endpoint
    the load balancing chose, when no backend answered to say it."""
    return tuple(sorted({h.chain for h in hits if h.chain.startswith((SEP, NFT_ENDPOINT))}))


class SpreadReader:
    """Reads a probe's spread from the lab's kernel: the rules its connection met, with the service chain's jumps
    from the node's nat table (read once per node, family and chain until the rules change), or IPVS's virtual servers
    on the node it entered."""

    def __init__(self, namespaces: Mapping[str, str], proxy_mode: str, iptables_backend: str) -> None:
        self.namespaces, self.proxy_mode, self.backend = namespaces, proxy_mode, iptables_backend
        self._nat: dict[tuple[str, Family, str], str] = {}

    def forget(self) -> None:
        """The rules were replaced (a step)."""
        self._nat.clear()

    def spread(self, probe: ProbeSpec, observed: Observation) -> int:
        if self.proxy_mode == "ipvs":
            if observed.entry not in self.namespaces:
                return 1
            saved = run_command(self.namespaces[observed.entry], ("ipvsadm", "-Sn"))
            return ipvs_spread(saved, probe.protocol, probe.dst_ip, probe.dst_port)
        if (n := numgen_spread(hit for _, hit in observed.rules)) > 1:
            return n
        picked = next(((actor, chain) for actor, hit in observed.rules if (chain := picking_chain(hit))), None)
        if picked is None:
            return 1
        actor, chain = picked
        return max(1, len(jump_choices(self._chain_rules(actor, probe.family, chain), chain)))

    def _chain_rules(self, actor: str, family: Family, chain: str) -> str:
        """The chain's rules as iptables-save prints them (`iptables -S CHAIN`: the same lines): only the chain,
        as the table of a node at 10 000 endpoints is some 3 MB, listed by a different node for each probe."""
        if (actor, family, chain) not in self._nat:
            tool = f"{'ip6tables' if family == 'IPv6' else 'iptables'}-{self.backend}"
            self._nat[actor, family, chain] = run_command(self.namespaces[actor], (tool, "-t", "nat", "-S", chain))
        return self._nat[actor, family, chain]
