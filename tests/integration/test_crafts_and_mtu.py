"""Crafted segments from the backend's side and too-big packets, on the kernel: what conntrack did with each
(topologies/invalid-reset.yaml, topologies/pmtu-tunnel.yaml; their expectations are checked as scenario items
too, this checks the why: where each packet went, from which address)."""

from __future__ import annotations

import os

import pytest
from support.host import REPO
from support.scenario import write

from lab.api import run_variant
from lab.describe.load import load_scenario

INVALID_RESET = REPO / "topologies" / "invalid-reset.yaml"
PMTU = REPO / "topologies" / "pmtu-tunnel.yaml"
# torvalds/linux 6e250dcbff1d ("netfilter: conntrack: ignore overly delayed tcp packets"), first in 6.0.
IGNORES_LATE = tuple(int(n) for n in os.uname().release.split(".")[:2]) >= (6, 0)


def observed(path, matrix, probes=None):
    (topo,) = load_scenario(path, matrix).variants
    run = run_variant(topo, only=set(probes) if probes else None)
    return {r.probe.name: r.observed for r in run.results}


@pytest.fixture(scope="module")
def nftables_strict():
    """nftables mode (no INVALID drop rule) with tcp_be_liberal=0: where conntrack's verdict shows."""
    # 1.30: the first release with nftables mode, and the last that runs it on kernels before 5.13 (#124152).
    return observed(INVALID_RESET, {"proxyMode": ["nftables"], "tcpBeLiberal": [False], "kubeVersion": ["1.30"]})


def test_a_late_retransmission_is_ignored_by_conntrack_from_linux_6_0(nftables_strict):
    late = nftables_strict["late-retransmission-from-backend"]
    if IGNORES_LATE:
        assert late.outcome == "delivered", late.explanation
        # Reverse-NATed (the Service's address): conntrack kept it with its connection, and the client ACKed it.
        assert late.explanation.startswith("the crafted late retransmission reached the client from 10.96.0.10:80;")
        assert "the client answered it with 10.244.1.2:" in late.explanation and "tcp [.]" in late.explanation
    else:  # INVALID: un-NATed, the client resets it
        assert late.outcome == "reset", late.explanation
        assert "reached the client from 10.244.2.2:8080 (web)" in late.explanation


def test_a_segment_ahead_of_the_window_is_invalid_on_every_kernel(nftables_strict):
    ahead = nftables_strict["out-of-window-from-backend"]
    assert ahead.outcome == "reset", ahead.explanation
    assert "the crafted out-of-window segment reached the client from 10.244.2.2:8080 (web)" in ahead.explanation
    assert "the client answered it with 10.244.1.2:" in ahead.explanation and "tcp [R]" in ahead.explanation


def test_a_backend_reset_is_reverse_natted_and_closes_the_entry(nftables_strict):
    reset = nftables_strict["reset-from-backend"]
    assert reset.outcome == "reset", reset.explanation
    assert reset.explanation.startswith("the crafted RST from the backend reached the client from 10.96.0.10:80;")
    assert len(reset.conntrack) == 2 and all(" CLOSE " in entry for entry in reset.conntrack), reset.conntrack


@pytest.fixture(scope="module")
def pmtu():
    return observed(PMTU, {"proxyMode": ["iptables"]})


def test_the_icmp_about_a_natted_packet_comes_back_translated(pmtu):
    big = pmtu["full-segment-through-the-tunnel"]
    assert big.outcome == "delivered", big.explanation
    assert big.explanation.startswith(
        "the client's 1500-byte packet was last seen node1/veth-client in; node1 answered with ICMP fragmentation"
        " needed (MTU 1450), from 10.96.0.10; it went out to the client (node1/veth-client out) quoting 10.244.1.1:"
    ), big.explanation
    assert "> 10.96.0.10:80, the address the client called (the packet had been DNATed to 10.244.2.1:8080" in (
        big.explanation
    )
    datagram = pmtu["full-datagram-through-the-tunnel"]
    assert datagram.outcome == "unreachable" and datagram.error.startswith("ICMP fragmentation needed"), datagram


def test_a_link_smaller_than_the_tunnel_assumes_is_a_blackhole(pmtu):
    lost = pmtu["full-segment-to-the-small-link"]
    assert lost.outcome == "dropped", lost.explanation
    assert lost.explanation.endswith("then its 1450-byte packets were last seen node1/vxlan.calico out")
    assert pmtu["small-request-to-the-small-link"].outcome == "delivered"


def test_tunnel_mtu_sets_the_tunnel_device(tmp_path):
    text = PMTU.read_text().replace("  tunnel: vxlan\n", "  tunnel: vxlan\n  tunnelMTU: 1300\n")
    text = text.replace(", mtu: 1400}", "}")  # every link at 1500, so the tunnel's MTU is the smallest
    seen = observed(write(tmp_path, text), {"proxyMode": ["iptables"]}, ["full-segment-through-the-tunnel"])
    big = seen["full-segment-through-the-tunnel"]
    assert big.outcome == "delivered" and "ICMP fragmentation needed (MTU 1300)" in big.explanation, big
