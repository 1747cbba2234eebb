"""install's parsers of what a node's kernel holds (lab/install/kernel_state.py): the tools' output, as they print
it, into the typed state kube-proxy's sync decides from. Pure: no root, no kernel."""

from __future__ import annotations

from lab.install.kernel_state import parse_addresses, parse_ipvsadm, parse_set_members
from lab.render.kubeproxy.kernel_state import RealServerState

IPVSADM = """\
IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.10:80 rr
  -> 10.244.2.2:80                Masq    0      1          0
  -> 10.244.2.3:80                Masq    1      0          4
UDP  10.96.0.20:53 rr persistent 10800
  -> 10.244.2.4:53                Masq    1      0          2
SCTP  10.96.0.30:9 rr
"""


def test_ipvsadm_real_servers_with_their_virtual_server_weight_and_connections():
    """The heading lines (whose column names take the numbers' places) are no real server."""
    assert parse_ipvsadm(IPVSADM) == (
        RealServerState("TCP", "10.96.0.10:80", "10.244.2.2:80", weight=0, active=1, inactive=0),
        RealServerState("TCP", "10.96.0.10:80", "10.244.2.3:80", weight=1, active=0, inactive=4),
        RealServerState("UDP", "10.96.0.20:53", "10.244.2.4:53", weight=1, active=0, inactive=2),
    )
    assert parse_ipvsadm("") == ()


def test_kube_ipvs0_addresses_with_their_prefix():
    listing = (
        "5: kube-ipvs0    inet 10.96.0.10/32 scope global kube-ipvs0\\       valid_lft forever preferred_lft forever\n"
        "5: kube-ipvs0    inet 10.96.0.20/32 scope global kube-ipvs0\\       valid_lft forever preferred_lft forever\n"
    )
    assert parse_addresses(listing) == ("10.96.0.10/32", "10.96.0.20/32")


def test_kube_ipvs0_addresses_of_both_families():
    """A dual-stack node's kube-ipvs0 (`ip -o addr show dev D scope global`, as this kernel printed it)."""
    listing = (
        "3: kube-ipvs0    inet 10.96.0.10/32 scope global kube-ipvs0\\       valid_lft forever preferred_lft forever\n"
        "3: kube-ipvs0    inet6 fd00:10:96::a/128 scope global \\       valid_lft forever preferred_lft forever\n"
    )
    assert parse_addresses(listing) == ("10.96.0.10/32", "fd00:10:96::a/128")


def test_set_members_as_ipset_save_prints_them():
    save = (
        "create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\n"
        "add KUBE-CLUSTER-IP 10.96.0.10,tcp:80\n"
        "add KUBE-CLUSTER-IP 10.96.0.20,udp:53\n"
    )
    assert parse_set_members(save) == ("add KUBE-CLUSTER-IP 10.96.0.10,tcp:80", "add KUBE-CLUSTER-IP 10.96.0.20,udp:53")
