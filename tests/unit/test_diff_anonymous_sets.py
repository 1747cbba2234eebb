"""lab diff reads an nft anonymous set as the kernel lists it (each form read back from `nft list ruleset` on this
host): one element bare (`ip daddr { 10.96.0.0/16 } drop`, kube-proxy's drop of unallocated ClusterIPs, is listed
`ip daddr 10.96.0.0/16 drop`), adjacent networks of an interval set merged, elements sorted, a map kept."""

from __future__ import annotations

import pytest

from lab.replay.diff.nft import rule


@pytest.mark.parametrize(
    ("written", "listed"),
    [
        ("ip daddr { 10.96.0.0/16 } drop", "ip daddr 10.96.0.0/16 drop"),
        ("ip6 daddr { fd00:10:96::/112 } drop", "ip6 daddr fd00:10:96::/112 drop"),
        ("ip daddr { 10.96.0.0/16,10.97.0.0/16 } drop", "ip daddr { 10.96.0.0/15 } drop"),
        ("ip6 saddr != { fd00::/64, fd00:0:0:1::/64 } drop", "ip6 saddr != { fd00::/63 } drop"),
        ("ip saddr { 10.0.0.2, 10.0.0.3, 10.1.0.0/16 } drop", "ip saddr { 10.0.0.2/31, 10.1.0.0/16 } drop"),
        ("ip saddr { 10.0.0.3, 10.0.0.2 } drop", "ip saddr { 10.0.0.2, 10.0.0.3 } drop"),
        ("meta l4proto { tcp } drop", "meta l4proto tcp drop"),
    ],
)
def test_an_anonymous_set_reads_as_nft_lists_it(written, listed):
    assert rule(written) == rule(listed)


def test_a_map_of_one_element_keeps_its_braces_and_sets_of_other_networks_differ():
    assert rule("numgen random mod 1 vmap { 0 : goto endpoint-a }").endswith("{ 0 : goto endpoint-a }")
    assert rule("ip daddr { 10.96.0.0/16 } drop") != rule("ip daddr { 10.96.0.0/12 } drop")
