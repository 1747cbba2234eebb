"""What a node's kernel holds when kube-proxy syncs, read with the real tools and parsed into the typed state
render's sync decides from (lab/render/kubeproxy/kernel_state.py). Only reading here: no decision."""

from __future__ import annotations

from lab.install.conntrack import udp_entries
from lab.install.tools import run_command
from lab.render.dataplane import IPVS_DEVICE
from lab.render.kubeproxy.kernel_state import KernelState, Reads, RealServerState

_PROTOCOLS = ("TCP", "UDP", "SCTP")
# kube-ipvs0's addresses of both families (a dual-stack node's two proxiers share it; each reads its own family,
# lab/render/kubeproxy/ipvs_resync.py), global ones only: the link-local address the kernel gives the dummy in an
# IPv6 namespace is none of kube-proxy's (isValidForSet skips IPv6 link-local) and it never unbinds it.
_BOUND = ("ip", "-o", "addr", "show", "dev", IPVS_DEVICE, "scope", "global")


def parse_ipvsadm(listing: str) -> tuple[RealServerState, ...]:
    """`ipvsadm -Ln`: a virtual server's line (`TCP  10.96.0.10:80 rr`) then its real servers' (`  -> 10.244.1.2:8080
    Masq  1  0  0`: address, forward, Weight, ActiveConn, InActConn); headings and other lines are skipped."""
    servers, service = [], None
    for line in listing.splitlines():
        words = line.split()
        if words[:1] and words[0] in _PROTOCOLS and len(words) >= 2:
            service = (words[0], words[1])
        elif words[:1] == ["->"] and len(words) >= 6 and service and all(w.isdigit() for w in words[3:6]):
            protocol, address = service
            weight, active, inactive = (int(w) for w in words[3:6])
            servers.append(RealServerState(protocol, address, words[1], weight, active, inactive))
    return tuple(servers)


def parse_addresses(listing: str) -> tuple[str, ...]:
    """`ip -o addr show dev D`: each line's address with its prefix (`... inet 10.96.0.10/32 scope ...`, `... inet6
    fd00:10:96::a/128 scope ...`)."""
    return tuple(words[3] for words in (line.split() for line in listing.splitlines()) if len(words) > 3)


def parse_set_members(save: str) -> tuple[str, ...]:
    """`ipset save`: the member lines (`add SET ENTRY`), as it prints them."""
    return tuple(line for line in save.splitlines() if line.startswith("add "))


def read_state(netns: str, wanted: Reads) -> KernelState:
    """The parts of one node's kernel its kube-proxy looks at in a sync."""
    conntrack = udp_entries(netns) if wanted.conntrack else ()
    if not wanted.ipvs:
        return KernelState(conntrack=conntrack)
    return KernelState(
        conntrack=conntrack,
        real_servers=parse_ipvsadm(run_command(netns, ("ipvsadm", "-Ln"))),
        bound_addresses=parse_addresses(run_command(netns, _BOUND)),
        set_members=parse_set_members(run_command(netns, ("ipset", "save"))),
    )
