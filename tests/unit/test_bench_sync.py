"""lab bench --sync without a kernel: its flags read or refused in words, the Services it generates and the change,
the kernel log's warnings counted, and what the client's connections say about the sync."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lab.bench.scale import CONFIG, NODE_IP, services
from lab.bench.sync import (
    CHANGED_ENDPOINT,
    Answer,
    Client,
    growth,
    one_endpoint_changed,
    parse_modes,
    parse_sync_sizes,
    traffic,
    version_problem,
    warnings_in,
)
from lab.render.kubeproxy import graceful
from lab.render.kubeproxy.addresses import host_port
from lab.render.kubeproxy.ipvs import render_ipvs
from lab.render.kubeproxy.kernel_state import RealServerState

REPO = Path(__file__).resolve().parents[2]


def test_sizes_are_read_smallest_first_once_and_bad_ones_refused():
    assert parse_sync_sizes("5000,1000,5000") == [1000, 5000]
    for bad in ("0", "x", "", "1000,", "-5", "60001", "1e3", "²", "١٠٠٠", "１０"):
        with pytest.raises(ValueError, match="expected Service counts from 1 to 60000, comma-separated"):
            parse_sync_sizes(bad)


def test_modes_are_the_bench_s_four_each_once():
    assert parse_modes("ipvs,nftables") == ["ipvs", "nftables"]
    with pytest.raises(ValueError, match="expected modes among nftables, iptables-nft, iptables-legacy, ipvs"):
        parse_modes("iptables")  # which backend: the bench names both
    with pytest.raises(ValueError, match="each mode once"):
        parse_modes("ipvs,ipvs")


def test_a_release_the_lab_does_not_render_is_named():
    assert version_problem("1.31", ["nftables", "ipvs"]) is None
    assert version_problem("1.29", ["iptables-nft"]) is None
    assert "nftables mode is not reproduced" in (version_problem("1.29", ["nftables"]) or "")
    assert "1.99" in (version_problem("1.99", ["ipvs"]) or "")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--sync", "0"], "argument --sync: expected Service counts from 1 to 60000"),
        (["--sync", "100", "--modes", "iptables"], "argument --modes: expected modes among nftables"),
        (["--modes", "ipvs"], "--modes and --kube-version choose what --sync times: give --sync N,... too"),
        (["--sync", "100", "--kube-version", "1.29", "--modes", "nftables"], "--kube-version: kube-proxy 1.29's"),
    ],
)
def test_bad_flags_are_refused_in_words_before_anything_is_built(argv, said):
    done = subprocess.run(
        [sys.executable, "-m", "lab", "bench", *argv], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_one_endpoint_changes_the_middle_service_alone():
    before = services(7)
    after = one_endpoint_changed(before)
    differing = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert differing == [3]
    (moved,) = after[3].endpoints
    assert moved.ip == CHANGED_ENDPOINT and moved.port == before[3].endpoints[0].port
    assert CHANGED_ENDPOINT not in {e.ip for s in before for e in s.endpoints}
    assert after[3].cluster_ip == before[3].cluster_ip and after[3].name == before[3].name


def test_the_generated_services_have_one_endpoint_each_and_distinct_addresses():
    svcs = services(60_000)
    assert all(len(s.endpoints) == 1 for s in svcs)
    assert len({s.cluster_ip for s in svcs}) == 60_000
    assert len({s.endpoints[0].ip for s in svcs}) == 60_000


def test_the_kernel_s_warnings_are_counted_by_kind():
    log = [
        "rcu: INFO: rcu_sched self-detected stall on CPU",
        "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
        "watchdog: BUG: soft lockup - CPU#13 stuck for 22s! [nft:222752]",
        "INFO: task nft:16867 blocked for more than 120 seconds.",
        "WARNING: CPU: 0 PID: 1 at net/netfilter/nf_tables_api.c:1 nf_tables_newset+0x1/0x2",
        "IPVS: Creating netns size=2048 id=7",
        "rcu: \t8-....: (59923 ticks this GP)",
    ]
    assert dict(warnings_in(log)) == {"RCU stall": 2, "soft lockup": 1, "hung task": 1, "WARNING": 1}


def test_traffic_reads_the_largest_time_without_an_answer_during_the_sync():
    answers = [
        Answer(0.00, 0.01, True),  # before: 10 ms
        Answer(0.02, 0.05, True),  # before: 30 ms
        Answer(0.98, 1.02, True),  # across the start
        Answer(1.10, 1.60, True),  # 500 ms, answered 0.58 s after the one before
        Answer(1.70, 3.70, False),  # lost
        Answer(3.75, 3.80, True),  # after the end
    ]
    seen = traffic(answers, start=1.0, end=3.0)
    assert seen.before_ms == pytest.approx(20)
    assert seen.slowest_ms == pytest.approx(2000)
    assert seen.gap_ms == pytest.approx(1400)  # 1.6 s to the sync's end with no answer
    assert (seen.lost, seen.during) == (1, 3)


def test_no_answer_during_the_whole_sync_is_a_gap_as_long_as_the_sync():
    seen = traffic([Answer(0.5, 5.0, False)], start=1.0, end=4.0)
    assert seen.gap_ms == pytest.approx(3000) and (seen.lost, seen.during) == (1, 1)


def test_growth_says_the_exponent_of_the_curve():
    assert growth(10.0, 1.0, 10_000, 1_000) == "10.0× (k=1.00)"
    assert growth(100.0, 1.0, 10_000, 1_000) == "100.0× (k=2.00)"
    assert growth(1.0, 0.0, 10_000, 1_000) == ""


def test_the_sync_waits_for_answers_to_read_its_own_against():
    client = Client("unused", services(1)[0])  # never entered: no connection is made
    client.answers = [Answer(0.0, 0.5, True)] * 5
    client.answered_before(5, within=0.0)
    client.answers = [Answer(0.0, 0.5, False)] * 9
    with pytest.raises(RuntimeError, match="before the full sync: 172.30.0.1:80 was not answered by its endpoint"):
        client.answered_before(5, within=0.05)


def test_the_ipvs_change_weighs_each_set_of_rules_once(monkeypatch):
    """The graceful termination check of a one-endpoint change: the moved real server alone, and the rules weighed
    once each, not once per real server (quadratic: a minute of the lab's own time at 2 000 Services)."""
    svcs = services(300)
    old = render_ipvs(svcs, CONFIG, [NODE_IP], "1.31")
    new = render_ipvs(one_endpoint_changed(svcs), CONFIG, [NODE_IP], "1.31")
    listed = tuple(
        RealServerState(vs.protocol, host_port(vs.address, vs.port), rs.text, rs.weight, 0, 0)
        for vs in old.virtual_servers
        for rs in vs.real_servers
    )
    weighed = []
    weights = graceful._weights
    monkeypatch.setattr(graceful, "_weights", lambda rules: weighed.append(rules) or weights(rules))
    (decision,) = graceful.graceful_terminations(listed, old, new)
    assert decision.delete and decision.server.address == f"{svcs[150].endpoints[0].ip}:{svcs[150].endpoints[0].port}"
    assert len(weighed) == 2
