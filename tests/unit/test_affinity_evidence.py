"""ClientIP affinity read from `nft monitor trace` in each family's table: the IPv6 proxier's lookup rule matches
`ip6 saddr @affinity-*` where the IPv4 one matches `ip saddr @affinity-*`, and both say the connection followed
the client's affinity (issue 31: the IPv6 one was judged "did not follow")."""

from __future__ import annotations

import pytest

from lab.judge.attempts import followed_affinity
from lab.probe.evidence.nftrace import TCP_SYN, packet_events, parse_trace, rule_hits
from lab.probe.observation import Observation
from lab.render.dataplane import affinity_lookup

FAMILIES = {
    "ip": ("saddr 10.244.2.3 ip daddr 10.96.0.94", "10.244.1.2"),
    "ip6": ("saddr fd00:10:244:2::3 ip6 daddr fd00:10:96::5e", "[fd00:10:244:1::2]"),
}
SERVICE = "service-H6U4RGLG-default/sticky/tcp/http"
ENDPOINT = "endpoint-3AHSELC2-default/sticky/tcp/http__EP/8080"
AFFINITY = "affinity-3AHSELC2-default/sticky/tcp/http__EP/8080"


def trace(ip: str, *, followed: bool) -> list[str]:
    """A SYN through the service chain as nft monitor trace prints it in the `ip` or `ip6` kube-proxy table: sent
    along the client's affinity set (`followed`), or balanced by the random pick and recorded in the set."""
    addresses, endpoint = FAMILIES[ip]
    head = f"trace id 6f1d2c3b {ip} kube-proxy"
    pick = (
        [f"{head} {SERVICE} rule {ip} saddr @{AFFINITY} goto {ENDPOINT} (verdict goto {ENDPOINT})"]
        if followed
        else [f"{head} {SERVICE} rule numgen random mod 2 vmap {{ 0 : goto {ENDPOINT} }} (verdict goto {ENDPOINT})"]
    )
    return [
        f'{head} nat-prerouting packet: iif "eth0" {ip} {addresses} tcp sport 53836 tcp dport 80 tcp flags == syn',
        f"{head} nat-prerouting rule jump services (verdict jump services)",
        f"{head} services rule {ip} daddr . meta l4proto . th dport vmap @service-ips (verdict goto {SERVICE})",
        *pick,
        f"{head} {ENDPOINT} rule update @{AFFINITY} {{ {ip} saddr }} (verdict continue)",
        f"{head} {ENDPOINT} rule meta l4proto tcp dnat to {endpoint}:8080 (verdict accept)",
    ]


def observed(lines: list[str]) -> Observation:
    hits = rule_hits(packet_events(parse_trace(lines), lambda packet: TCP_SYN.search(packet) is not None))
    return Observation("delivered", backend="sticky-0", rules=tuple(("node2", hit) for hit in hits))


@pytest.mark.parametrize("ip", ["ip", "ip6"])
def test_the_lookup_rule_met_in_either_familys_table_is_the_affinity_followed(ip):
    lookup = affinity_lookup("nftables")
    assert followed_affinity(observed(trace(ip, followed=True)), lookup)
    # The endpoint chain's `update @affinity-*` records the client: met on every connection, it says nothing.
    assert not followed_affinity(observed(trace(ip, followed=False)), lookup)
