"""sameBackend and affinity: several connections are judged together, and one that reached another backend (or
did or did not follow the client's affinity) fails the probe; the fields are refused where they cannot be
judged."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.scenario import BASE, ScriptedSession, error_for, write

from lab.describe.load import load_scenario
from lab.judge.attempts import followed_affinity, run_probe
from lab.probe.evidence.base import RuleHit
from lab.probe.observation import Observation
from lab.render.dataplane import affinity_lookup

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
        # The trace of the node that holds the lookup did not answer: no rule met says nothing either way.
        (
            replace(met(RECORD), unread=("node2: timed out after 10.0 s",)),
            "attempt 2: whether it was balanced anew (affinity expired) is not known: the rules that acted cannot "
            "be read on node2: timed out after 10.0 s",
        ),
    ],
)
def test_an_attempt_that_followed_an_expired_affinity_fails(tmp_path, second, reason):
    (topo,) = load_scenario(write(tmp_path, AFFINITY)).variants
    assert topo.probes[0].pause_ms == 1
    _, verdict = run_probe(ScriptedSession([met(RECORD), second]), topo.probes[0], topo)  # type: ignore[arg-type]
    assert verdict.reasons == (() if reason is None else (reason,))


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


@pytest.mark.parametrize(
    ("apart", "said"),
    [
        (0.4, "attempt 2: expected it followed the client's affinity, but it did not"),
        (
            1.5,
            "attempt 2: expected it followed the client's affinity, but it did not: it entered node2 1.50 s after the "
            "attempt before it (the captures' times), longer than the Service's 1 s affinity timeout",
        ),
    ],
)
def test_an_attempt_that_came_after_the_affinity_timeout_says_so(tmp_path, apart, said):
    (topo,) = load_scenario(write(tmp_path, STICKY)).variants
    assert topo.services[0].affinity_timeout == 1
    first, second = replace(met(RECORD), entered_at=100.0), replace(met(RECORD), entered_at=100.0 + apart)
    _, verdict = run_probe(ScriptedSession([first, second]), topo.probes[0], topo)  # type: ignore[arg-type]
    (reason,) = verdict.reasons
    assert reason.startswith(said), reason
    assert ("affinity timeout" in reason) is (apart > 1)
