"""An affinity probe on a machine too slow to show the affinity: when the only thing that failed it is a connection
that came after the client's affinity had expired (the kernel rightly balanced it anew), it is sent again once in
the same lab, and passes if the connections then come within the timeout; if they are too far apart again, it is
skipped saying why, not failed. The slowness is made real here by waiting before a connection is sent; the
affinity's expiry and every verdict are the kernel's (nftables mode, the lookup rule matching or not)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

from support.host import REPO

from lab.describe.load import load_scenario
from lab.describe.topology import ProbeSpec, Topology
from lab.judge.attempts import run_probe
from lab.pipeline import standing
from lab.probe.observation import Observation
from lab.probe.session import ProbeSession

SCENARIO = REPO / "tests" / "integration" / "topologies" / "affinity-timeout.yaml"
TIMEOUT = 3  # the Service's timeoutSeconds here: a connection sent within it follows the affinity on a busy machine
LATE = TIMEOUT + 1.0  # a wait longer than the timeout before a connection


class SlowSession:
    """A probe session whose connections numbered in `late` (1: the first it sends) wait LATE seconds first."""

    def __init__(self, session: ProbeSession, late: set[int]) -> None:
        self.session = session
        self.late = late
        self.sent = 0

    def run(self, probe: ProbeSpec, running: Topology) -> Observation:
        self.sent += 1
        if self.sent in self.late:
            time.sleep(LATE)
        return self.session.run(probe, running)


def _sticky(tmp_path) -> Topology:
    text = SCENARIO.read_text().replace("timeoutSeconds: 1}", f"timeoutSeconds: {TIMEOUT}}}")
    text = text.replace("    attempts: 4\n", "    attempts: 2\n")
    path = tmp_path / "affinity.yaml"
    path.write_text(text)
    (topo,) = load_scenario(path, {"proxyMode": ["nftables"], "kubeVersion": ["1.34"]}).variants
    assert topo.services[0].affinity_timeout == TIMEOUT
    return topo


def test_connections_too_far_apart_are_sent_again_then_skipped(tmp_path, host_unchanged):
    topo = _sticky(tmp_path)
    probe = next(p for p in topo.probes if p.name == "within-the-timeout")
    with standing(topo) as stood, ProbeSession(stood.realized) as session:
        # The second connection late once: the second round, sent at once, shows the affinity.
        once = SlowSession(session, {2})
        observed, verdict = run_probe(once, probe, topo)  # type: ignore[arg-type]
        # Late each time: the lab cannot know.
        always = SlowSession(session, {2, 4})
        _, skipped = run_probe(always, probe, topo)  # type: ignore[arg-type]
    assert once.sent == 4 and verdict.ok and not verdict.skipped, (verdict, observed.path)
    assert observed.path[0].startswith(
        "sent again, the first 2 connections too far apart: attempt 2: expected it followed the client's affinity, "
        "but it did not: it entered node2 "
    ), observed.path
    assert always.sent == 4 and not skipped.ok and not skipped.failed and not skipped.reasons, skipped
    assert f"longer than the Service's {TIMEOUT} s affinity timeout" in skipped.skipped
    assert "; sent again: attempt 2: expected it followed the client's affinity, but it did not" in skipped.skipped
    assert skipped.skipped.endswith("(run it again on a less busy machine, or give the Service a longer timeout)")


CONFTEST = """
import lab.pytest_plugin as plugin
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.judge.verdict import Verdict
from lab.probe.observation import Observation

def too_slow(topology):
    verdict = Verdict(False, skipped="whether the connections follow the client's affinity cannot be known: slow")
    results = [ProbeResult(topology, p, Observation("delivered"), verdict) for p in topology.probes]
    return VariantRun(topology, results, Timing(0, 0, 0, 0))

plugin.run_variant = too_slow  # every probe's answer unknowable, without building the variant
"""


def test_a_scenario_item_whose_answer_cannot_be_known_is_skipped_with_the_reason(tmp_path):
    shutil.copy(SCENARIO, tmp_path / "s.yaml")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "--rootdir", str(tmp_path), "s.yaml"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " skipped" in done.stdout and " failed" not in done.stdout, done.stdout[-3000:]
    assert "affinity cannot be known: slow" in done.stdout, done.stdout[-3000:]
