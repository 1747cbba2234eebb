"""sameBackend and affinity: several connections are judged together, and one that reached another backend (or
did or did not follow the client's affinity) fails the probe; the fields are refused where they cannot be
judged."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console
from support.scenario import BASE, ScriptedSession, error_for, write

from lab.bench.stages import untimed
from lab.describe.load import load_scenario
from lab.helptext import NOTHING_TESTED
from lab.judge import attempts
from lab.judge.attempts import followed_affinity, run_probe
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.judge.verdict import Verdict
from lab.live.cli import probe_status
from lab.live.keeper import probe_answer
from lab.probe.evidence.base import RuleHit
from lab.probe.observation import Observation
from lab.render.dataplane import affinity_lookup
from lab.report.html import page
from lab.report.records import evidence_lines, summary, to_record
from lab.report.terminal import scenario_table

SAME = BASE.replace(
    "    expect: {outcome: delivered, source: node2}\n",
    "    attempts: 3\n    expect: {outcome: delivered, sameBackend: true}\n",
)


def seen(*backends: str) -> list[Observation]:
    return [Observation("delivered", backend=b, node="node1", entry="node2") for b in backends]


@pytest.mark.parametrize(
    ("backends", "reason"),
    [
        (("web-1", "web-1", "web-1"), None),
        (("web-1", "web-0", "web-1"), "expected the same backend on every attempt, got web-0 ×1, web-1 ×2"),
    ],
)
def test_attempts_reaching_two_backends_fail(tmp_path, backends, reason):
    (topo,) = load_scenario(write(tmp_path, SAME)).variants
    _, verdict = run_probe(ScriptedSession(seen(*backends)), topo.probes[0], topo)  # type: ignore[arg-type]
    assert verdict.ok is (reason is None)
    assert reason is None or reason in verdict.reasons, verdict.reasons


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (SAME.replace("    attempts: 3\n", ""), "probes[0].expect.sameBackend", "give attempts: N"),
        (
            SAME.replace("outcome: delivered, sameBackend", "outcome: refused, sameBackend"),
            "probes[0].expect.outcome",
            "sameBackend and affinity only make sense when delivered",
        ),
    ],
)
def test_same_backend_is_refused_where_it_cannot_be_judged(tmp_path, text, field, message):
    error = error_for(tmp_path, text)
    assert error.field == field and message in error.message, str(error)


AFFINITY = SAME.replace("sameBackend: true", "affinity: false").replace(
    "    attempts: 3\n", "    attempts: 2\n    pause: 1\n"
)
RCHECK = RuleHit(
    "nat",
    "KUBE-SVC-X",
    "-m recent --name KUBE-SEP-Y --mask 255.255.255.255 --rsource --rcheck --seconds 1 --reap -j KUBE-SEP-Y",
    1,
)
RECORD = RuleHit("nat", "KUBE-SEP-Y", "-m recent --set --name KUBE-SEP-Y --mask 255.255.255.255 --rsource", 1)
NFT_LOOKUP = RuleHit("kube-proxy", "service-X", "ip saddr @affinity-Y goto endpoint-Y (verdict goto endpoint-Y)", 1)
NFT_UPDATE = RuleHit("kube-proxy", "endpoint-Y", "update @affinity-Y { ip saddr } (verdict continue)", 1)


def met(*hits: RuleHit) -> Observation:
    return Observation(
        "delivered", backend="web-0", node="node1", entry="node2", rules=tuple(("node2", h) for h in hits)
    )


def test_only_the_lookup_rules_say_a_connection_followed_the_affinity():
    xt, nft = affinity_lookup("iptables"), affinity_lookup("nftables")
    assert followed_affinity(met(RCHECK, RECORD), xt) and followed_affinity(met(NFT_LOOKUP, NFT_UPDATE), nft)
    assert not followed_affinity(met(RECORD), xt) and not followed_affinity(met(NFT_UPDATE), nft)
    assert not followed_affinity(met(NFT_LOOKUP), xt) and not followed_affinity(met(RCHECK), affinity_lookup("ipvs"))


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        (met(RECORD), None),
        (met(RCHECK, RECORD), "attempt 2: expected it was balanced anew (affinity expired), but it followed it"),
    ],
)
def test_an_attempt_that_followed_an_expired_affinity_fails(tmp_path, second, reason):
    (topo,) = load_scenario(write(tmp_path, AFFINITY)).variants
    assert topo.probes[0].pause_ms == 1
    _, verdict = run_probe(ScriptedSession([met(RECORD), second]), topo.probes[0], topo)  # type: ignore[arg-type]
    assert verdict.reasons == (() if reason is None else (reason,))


UNREAD_TRACE = replace(met(RECORD), unread=("node2: timed out after 10.0 s",))
NOT_KNOWN = (
    "attempt 2: whether it was balanced anew (affinity expired) is not known: the rules that acted cannot be read "
    "on node2: timed out after 10.0 s"
)


def test_an_attempt_whose_rules_went_unread_twice_is_skipped_not_failed(tmp_path):
    # The trace of the node that holds the lookup did not answer (a busy machine): no rule met says nothing either
    # way, so the connections are sent again once, and unread again the probe is neither passed nor failed.
    (topo,) = load_scenario(write(tmp_path, AFFINITY)).variants
    session = ScriptedSession([met(RECORD), UNREAD_TRACE, met(RECORD), UNREAD_TRACE])
    observed, verdict = run_probe(session, topo.probes[0], topo)  # type: ignore[arg-type]
    assert not session.observations and not verdict.ok and not verdict.failed
    assert observed.path[0] == f"sent again, the first 2 connections with their rules unread: {NOT_KNOWN}"
    assert verdict.skipped == (
        f"whether the connections follow the client's affinity cannot be known: {NOT_KNOWN}; sent again: "
        f"{NOT_KNOWN}: the rules that acted could not be read (run it again on a less busy machine)"
    )


def test_an_attempt_whose_rules_were_read_when_sent_again_is_judged(tmp_path):
    (topo,) = load_scenario(write(tmp_path, AFFINITY)).variants
    for second, ok in ((met(RECORD), True), (met(RCHECK, RECORD), False)):
        session = ScriptedSession([met(RECORD), UNREAD_TRACE, met(RECORD), second])
        _, verdict = run_probe(session, topo.probes[0], topo)  # type: ignore[arg-type]
        assert not session.observations and verdict.ok is ok and verdict.failed is not ok, verdict


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (AFFINITY.replace("    attempts: 2\n    pause: 1\n", ""), "probes[0].expect.affinity", "give attempts: N"),
        (AFFINITY.replace("    attempts: 2\n", ""), "probes[0]", "`pause` is the time between attempts"),
        (AFFINITY.replace("cluster: {", "cluster: {proxyMode: ipvs, "), "probes[0].expect.affinity", "judge it there"),
    ],
)
def test_affinity_is_refused_where_it_cannot_be_judged(tmp_path, text, field, message):
    error = error_for(tmp_path, text)
    assert error.field == field and message in error.message, str(error)


STICKY = (
    SAME.replace("sameBackend: true", "affinity: true")
    .replace("    attempts: 3\n", "    attempts: 2\n")
    .replace(
        "      selector: {app: web}\n",
        "      selector: {app: web}\n      sessionAffinity: ClientIP\n"
        "      sessionAffinityConfig: {clientIP: {timeoutSeconds: 1}}\n",
    )
)


def at(o: Observation, seconds: float, backend: str = "web-0") -> Observation:
    """`o` as it entered node2 at `seconds` (the captures' clock), answered by `backend`."""
    return replace(o, entered_at=seconds, backend=backend)


FOLLOWED, BALANCED = met(RCHECK, RECORD), met(RECORD)  # the lookup rule matched the client, or did not
SLOW = "attempt 2: expected it followed the client's affinity, but it did not: it entered node2 1.50 s after the "
LATE = "longer than the Service's 1 s affinity timeout, so the client's affinity had expired, as the kernel lets it"


def sticky(tmp_path, text: str = STICKY):
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert topo.services[0].affinity_timeout == 1
    return topo


def judged(topo, observations: list[Observation]):
    """The probe judged on `observations`, and how many of them it did not send."""
    session = ScriptedSession(observations)
    observed, verdict = run_probe(session, topo.probes[0], topo)  # type: ignore[arg-type]
    return observed, verdict, len(session.observations)


def test_connections_too_far_apart_twice_cannot_show_the_affinity(tmp_path):
    # Each time the second connection came 1.5 s after the first, past the 1 s timeout: the kernel let the affinity
    # expire, so whether the rules keep it is not known here. The probe is skipped, saying why, not failed.
    slow = [at(BALANCED, 100.0), at(BALANCED, 101.5), at(BALANCED, 103.0), at(BALANCED, 104.5)]
    observed, verdict, left = judged(sticky(tmp_path), slow)
    assert left == 0  # sent again once
    assert not verdict.ok and not verdict.failed and not verdict.reasons
    assert verdict.skipped.startswith("whether the connections follow the client's affinity cannot be known: " + SLOW)
    assert f"{LATE}; sent again: {SLOW}" in verdict.skipped, verdict.skipped
    assert verdict.skipped.endswith(
        "this machine was too slow to send the connections within the Service's 1 s affinity timeout (run it "
        "again on a less busy machine, or give the Service a longer timeout)"
    )
    assert len(observed.connections) == 2 and observed.path[0].startswith("sent again, the first 2 connections")


def test_connections_too_far_apart_then_within_the_timeout_pass(tmp_path):
    slow_then_quick = [at(BALANCED, 100.0), at(BALANCED, 101.5), at(BALANCED, 102.0), at(FOLLOWED, 102.3)]
    observed, verdict, left = judged(sticky(tmp_path), slow_then_quick)
    assert left == 0 and verdict.ok and not verdict.skipped, verdict
    assert observed.path[0].startswith(f"sent again, the first 2 connections too far apart: {SLOW}")


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        # Within the timeout the affinity held: a connection that did not follow it is the rules' failure.
        (at(BALANCED, 100.4), "attempt 2: expected it followed the client's affinity, but it did not"),
        (at(FOLLOWED, 100.4), None),
        (at(FOLLOWED, 101.5), None),
    ],
)
def test_a_connection_within_the_timeout_that_did_not_follow_the_affinity_fails(tmp_path, second, reason):
    _, verdict, left = judged(sticky(tmp_path), [at(BALANCED, 100.0), second])
    assert left == 0 and not verdict.skipped
    assert verdict.reasons == (() if reason is None else (reason,))
    assert verdict.failed is (reason is not None)


def test_the_connections_fail_when_more_than_their_slowness_fails_them(tmp_path):
    # Attempt 2 came too late, but attempt 3 broke the affinity within the timeout: no second round, a failure.
    text = STICKY.replace("    attempts: 2\n", "    attempts: 3\n")
    mixed = [at(BALANCED, 100.0), at(BALANCED, 101.5), at(BALANCED, 101.8)]
    _, verdict, left = judged(sticky(tmp_path, text), mixed)
    assert left == 0 and verdict.failed and not verdict.skipped
    assert verdict.reasons[0].startswith(SLOW) and LATE in verdict.reasons[0]
    assert verdict.reasons[1] == "attempt 3: expected it followed the client's affinity, but it did not"


@pytest.mark.parametrize(
    ("backends", "failed"),
    # The backend changed at the late attempt only (the kernel balanced it anew), or also within the timeout.
    [(("web-0", "web-1", "web-1"), False), (("web-0", "web-1", "web-0"), True)],
)
def test_another_backend_after_the_affinity_expired_is_not_the_rules_failure(tmp_path, backends, failed):
    text = STICKY.replace("    attempts: 2\n", "    attempts: 3\n").replace(
        "affinity: true", "sameBackend: true, affinity: true"
    )
    first = [at(BALANCED, 100.0, backends[0]), at(BALANCED, 101.5, backends[1]), at(FOLLOWED, 101.8, backends[2])]
    _, verdict, _ = judged(
        sticky(tmp_path, text), first + [at(BALANCED, 103.0), at(BALANCED, 104.5), at(FOLLOWED, 104.8)]
    )
    assert verdict.failed is failed and bool(verdict.skipped) is not failed, verdict
    assert failed is ("expected the same backend on every attempt, got web-0 ×2, web-1 ×1" in verdict.reasons)


def test_a_pause_that_outwaits_the_timeout_is_said_and_not_sent_again(tmp_path, monkeypatch):
    monkeypatch.setattr(attempts.time, "sleep", lambda seconds: None)  # the pause itself: the times are given
    _, verdict, left = judged(
        sticky(tmp_path, STICKY.replace("    attempts: 2\n", "    attempts: 2\n    pause: 1000\n")),
        [at(BALANCED, 100.0), at(BALANCED, 101.5), at(BALANCED, 103.0)],
    )
    assert left == 1 and not verdict.failed  # no second round: the pause would outwait it again
    assert verdict.skipped.endswith(
        "the probe's pause (1000 ms) is not shorter than the Service's 1 s affinity timeout (give it a shorter pause)"
    )


def test_without_the_services_affinity_a_connection_did_not_follow_any(tmp_path):
    # No sessionAffinity: no timeout to outwait, however far apart the connections came.
    text = STICKY.replace("      sessionAffinity: ClientIP\n", "").replace(
        "      sessionAffinityConfig: {clientIP: {timeoutSeconds: 1}}\n", ""
    )
    (topo,) = load_scenario(write(tmp_path, text)).variants
    _, verdict, _ = judged(topo, [at(BALANCED, 100.0), at(BALANCED, 105.0)])
    assert verdict.failed
    assert verdict.reasons == ("attempt 2: expected it followed the client's affinity, but it did not",)


def test_a_probe_that_could_not_show_the_affinity_is_reported_skipped_not_failed(tmp_path):
    topo = sticky(tmp_path)
    slow = [at(BALANCED, 100.0), at(BALANCED, 101.5), at(BALANCED, 103.0), at(BALANCED, 104.5)]
    observed, verdict, _ = judged(topo, slow)
    passed = ProbeResult(topo, topo.probes[0], observed, Verdict(True))
    result = replace(passed, verdict=verdict)
    run = VariantRun(topo, [result, passed], Timing(0, 0, 0, 0))
    record = to_record(result)
    assert record["ok"] is None and record["skipped"] == verdict.skipped and record["observed"]["outcome"]
    assert summary([run]) == {"passed": 1, "failed": 0, "skipped": 1}
    assert f"skipped: {verdict.skipped}" in evidence_lines(result)
    console = Console(record=True, width=400)
    console.print(scenario_table("t", [run]))
    assert [line.split("│")[-2].strip() for line in console.export_text().splitlines() if " p " in line] == [
        "SKIP",
        "PASS",
    ]
    html = page([("t", [run])], tmp_path)
    assert "1 passed, 0 failed, 1 skipped" in html and 'class="probe skip"' in html and " failed</h2>" not in html
    # A live lab's `lab probe` answers the same: neither passed (0) nor failed (1), but nothing tested (3).
    assert [probe_status(probe_answer(r, "")["ok"]) for r in (result, passed)] == [NOTHING_TESTED, 0]
    assert probe_status(probe_answer(replace(passed, verdict=Verdict(False, ("x",))), "")["ok"]) == 1
    # A benchmark's timings do not count with it, and it says which probe and why (it said "failed: ()").
    assert untimed(VariantRun(topo, [passed], Timing(0, 0, 0, 0))) == ""
    said = untimed(run)
    assert said.startswith(f"{result.probe.name} could not be judged ({verdict.skipped}): timings"), said
