"""What a node's kernel holds when kube-proxy syncs, as install read it: the facts kube-proxy's sync looks at
before it decides what to write (lab/render/kubeproxy/sync.py). Typed here, parsed from the tools' output by
lab/install/kernel_state.py; render reads nothing from the machine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConntrackEntry:
    """One conntrack entry as `conntrack -L` prints it, with the fields kube-proxy's cleanup reads."""

    text: str
    orig_src: str
    orig_dst: str
    orig_dport: int
    reply_src: str


@dataclass(frozen=True)
class RealServerState:
    """One IPVS real server as `ipvsadm -Ln` lists it: its virtual server, weight and connection counts."""

    protocol: str  # "TCP", "UDP", "SCTP"
    service: str  # the virtual server's "IP:port" ("[IP]:port" for IPv6, as ipvsadm writes it)
    address: str  # the real server's "IP:port" (likewise)
    weight: int
    active: int  # ActiveConn
    inactive: int  # InActConn


@dataclass(frozen=True)
class KernelState:
    """What install read of one node before a sync; a part kube-proxy of that mode and release does not read
    stays empty (Reads says which)."""

    conntrack: tuple[ConntrackEntry, ...] = ()  # the UDP entries
    real_servers: tuple[RealServerState, ...] = ()  # in `ipvsadm -Ln`'s order, every family's
    bound_addresses: tuple[str, ...] = ()  # kube-ipvs0's global ones of every family, as "IP/prefix"
    set_members: tuple[str, ...] = ()  # every ipset member, as `ipset save` prints it: "add SET ENTRY"


@dataclass(frozen=True)
class Reads:
    """Which parts of the kernel a node's kube-proxy looks at in a sync (what install is asked to read)."""

    conntrack: bool = False  # the 1.32+ reconciler lists the UDP entries on every sync
    ipvs: bool = False  # ipvs mode: its real servers, kube-ipvs0's addresses, the sets' members
