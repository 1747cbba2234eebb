"""lab replay --nft without a kernel: DNAT targets of a dump, and which trace events are the probe's."""

from __future__ import annotations

from functools import partial

from lab.probe.client import ClientResult
from lab.probe.evidence.nftrace import event_verdict, packet_events, parse_trace, rule_hits
from lab.replay.dump import Target, nft_dnat_targets
from lab.replay.env import Setup
from lab.replay.watch import is_probe_packet


def probe_events(events, setup, client):
    return packet_events(events, partial(is_probe_packet, setup=setup, client=client))


SCRIPT = """\
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 ip saddr 10.180.0.1 jump mark-for-masquerade
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80
add rule ip kube-proxy endpoint-X-ns2/svc2/udp/dns__10.180.0.2/53 meta l4proto udp dnat to 10.180.0.2:53
"""
LISTED = """\
table inet t {
\tchain c {
\t\ttcp dport 8080 dnat ip to 10.0.0.9:80
\t\tudp dport 53 dnat ip to 10.0.0.8
\t\tdnat ip to ip daddr map { 1.2.3.4 : 10.0.0.7 }
\t}
}
"""


def test_dnat_targets_of_a_script_and_of_a_listing():
    assert nft_dnat_targets(SCRIPT + SCRIPT) == [
        Target("10.180.0.1", 80, "tcp"),
        Target("10.180.0.2", 53, "udp"),
    ]
    # maps keyed by address are not followed: only literal addresses are endpoints
    assert nft_dnat_targets(LISTED) == [Target("10.0.0.9", 80, "tcp"), Target("10.0.0.8", None, "udp")]


def test_dnat_targets_of_kube_proxy_1_36_numgen_maps():
    """1.36+ DNATs from the service chain through a numgen map: written (`nft -f`) and listed (`nft list`)."""
    written = (
        "add rule ip kube-proxy service-X-ns1/svc1/udp/dns meta l4proto udp dnat ip addr . port to numgen random"
        " mod 2 map { 0 : 10.180.0.1 . 53 , 1 : 10.180.0.2 . 5353 }\n"
    )
    listed = (
        "\t\tmeta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.244.0.10 . 9898, 1 : 10.244.0.8 . 9898 }\n"
    )
    assert nft_dnat_targets(written + listed) == [
        Target("10.180.0.1", 53, "udp"),
        Target("10.180.0.2", 5353, "udp"),
        Target("10.244.0.10", 9898, "tcp"),
        Target("10.244.0.8", 9898, "tcp"),
    ]


SETUP = Setup(("192.168.0.2",), "10.0.0.0/8", "10.0.0.2", "172.30.0.41", 80, "TCP", ())
SYN = 'iif "cni0" ip saddr 10.0.0.2 ip daddr {dst} tcp sport 51893 tcp dport 80 tcp flags == {flags} tcp window 1'
TRACE = [
    # the SYN in prerouting, DNATed
    f"trace id aaaa0001 ip kube-proxy nat-prerouting packet: {SYN.format(dst='172.30.0.41', flags='syn')}",
    "trace id aaaa0001 ip kube-proxy nat-prerouting rule jump services (verdict jump services)",
    "trace id aaaa0001 ip kube-proxy endpoint-A rule meta l4proto tcp dnat to 10.180.0.1:80 (verdict accept)",
    # its answer (another id), then the same SYN in forward under a new id
    "trace id bbbb0002 ip kube-proxy filter-forward packet: ip saddr 10.180.0.1 ip daddr 10.0.0.2 tcp flags == 0x12",
    "trace id bbbb0002 ip kube-proxy filter-forward policy accept",
    f"trace id cccc0003 ip kube-proxy filter-forward packet: {SYN.format(dst='10.180.0.1', flags='syn')}",
    "trace id cccc0003 ip kube-proxy filter-forward rule ct state new jump cluster-ips-check (verdict jump x)",
    "trace id cccc0003 ip kube-proxy filter-forward policy accept",
    # later the connection's FIN|ACK reuses the SYN's first id: not the probe's first packet
    f"trace id aaaa0001 ip kube-proxy filter-forward packet: {SYN.format(dst='172.30.0.41', flags='0x11')}",
    "trace id aaaa0001 ip kube-proxy filter-forward rule ct state new jump cluster-ips-check (verdict jump x)",
]


def test_probe_events_follow_the_first_packet_across_ids_not_a_reused_id():
    events = probe_events(parse_trace(TRACE), SETUP, ClientResult("delivered", local="10.0.0.2:51893"))
    assert [str(h) for h in rule_hits(events)] == [
        "kube-proxy nat-prerouting: jump services (verdict jump services)",
        "kube-proxy endpoint-A: meta l4proto tcp dnat to 10.180.0.1:80 (verdict accept)",
        "kube-proxy filter-forward: ct state new jump cluster-ips-check (verdict jump x)",
    ]
    # the policy that let it on is not a hit, but it was traced
    assert events[-1].text == "policy accept"


def test_udp_probe_is_its_client_port():
    setup = Setup(("192.168.0.2",), "10.0.0.0/8", "10.180.0.1", "172.30.0.41", 53, "UDP", ())
    lines = [
        # a pod reaching itself: its own answer also comes from 10.180.0.1, but from port 53
        "trace id 01 ip kube-proxy nat-prerouting packet: ip saddr 10.180.0.1 ip daddr 172.30.0.41 udp sport 40000 "
        "udp dport 53 udp length 14",
        "trace id 01 ip kube-proxy services rule ip daddr . meta l4proto . th dport vmap @service-ips (verdict goto s)",
        "trace id 02 ip kube-proxy nat-prerouting packet: ip saddr 10.180.0.1 ip daddr 10.0.0.1 udp sport 53 "
        "udp dport 40000 udp length 40",
        "trace id 02 ip kube-proxy services rule something else (verdict accept)",
    ]
    events = probe_events(parse_trace(lines), setup, ClientResult("delivered", local="10.180.0.1:40000"))
    assert [e.trace_id for e in events] == ["01"]


def test_reject_is_told_from_drop():
    events = parse_trace(
        [
            "trace id 1 ip kube-proxy reject-chain rule reject (verdict drop)",
            'trace id 1 ip kube-proxy cluster-ips-check rule ip daddr @cluster-ips reject comment "Reject x" '
            "(verdict drop)",
            'trace id 1 ip kube-proxy cluster-ips-check rule ip daddr 172.30.0.0/16 drop comment "not a reject" '
            "(verdict drop)",
            "trace id 1 ip kube-proxy service-endpoints-check rule ip daddr . meta l4proto . th dport vmap "
            "@no-endpoint-services (verdict goto reject-chain)",
            "trace id 1 ip filter forward policy drop",
        ]
    )
    assert [event_verdict(e) for e in events] == ["REJECT", "REJECT", "DROP", "goto", "DROP"]
