"""`lab run --html DIR` on the kernel, and the page in a real browser: headless Chromium (Debian's package) loads
it from file://, takes a screenshot and dumps the DOM; the page must render with no console message, a drawing of
the topology and of every probe's path, the hop and rule tables, the comparison, and pcap links."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.host import REPO

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/setup installs it)")
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (.*)")


def browse(page: Path, screenshot: Path) -> tuple[str, list[str]]:
    """The DOM Chromium built from `page`, and every console message it logged; a screenshot beside."""
    common = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    shot = subprocess.run(
        [*common, f"--screenshot={screenshot}", "--window-size=1300,2600", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.returncode == 0, shot.stderr
    dump = subprocess.run(
        [*common, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dump.returncode == 0, dump.stderr
    return dump.stdout, [m.group(1) for m in CONSOLE.finditer(dump.stderr)]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_the_console_check_sees_a_script_error(tmp_path):
    """The check below can fail: a page with a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><body><p>x</p><script>nosuchfunction();</script></body></html>")
    _, console = browse(bad, tmp_path / "bad.png")
    assert any("nosuchfunction" in message for message in console), console


def test_the_report_renders_in_chromium(tmp_path, host_unchanged):
    report, pcaps = tmp_path / "report", tmp_path / "report" / "pcaps"
    scenario = REPO / "topologies" / "nodeport-source-ip.yaml"
    run = subprocess.run(
        [sys.executable, "-m", "lab", "run", str(scenario), "--matrix", "proxyMode=iptables,nftables"]
        + ["--html", str(report), "--pcap", str(pcaps)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    page = report / "index.html"
    assert f"report: {page}" in run.stderr
    dom, console = browse(page, tmp_path / "report.png")
    assert console == [], console
    probes = 12  # 3 probes x 2 modes x 2 policies
    assert dom.count("<svg") == probes + 1  # the scenario's topology, then each probe's path over it
    assert dom.count('<article class="probe pass"') == probes
    assert dom.count('class="hops"') == probes and dom.count('class="rules"') == probes
    assert '<table class="compare">' in dom and ">iptables<" in dom and ">nftables<" in dom
    links = re.findall(r'href="(pcaps/[^"]+\.pcap)"', dom)
    assert links and all((report / link).is_file() for link in links)
    width, height = png_size(tmp_path / "report.png")
    assert (width, height) == (1300, 2600) and (tmp_path / "report.png").stat().st_size > 50_000
