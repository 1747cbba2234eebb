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


def lab_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", "run", *args], capture_output=True, text=True, cwd=REPO, timeout=600
    )


def test_the_report_renders_in_chromium(tmp_path, host_unchanged):
    """nodeport-source-ip in two modes, one probe's expectation made wrong (externalTrafficPolicy Local drops
    at node2, the copy expects delivered): its failure listed first and linked, red in the comparison, the rule
    that dropped it marked."""
    report, pcaps = tmp_path / "report", tmp_path / "report" / "pcaps"
    text = (REPO / "topologies" / "nodeport-source-ip.yaml").read_text()
    assert text.count("        outcome: dropped\n") == 1  # via-node-without-pod under Local
    scenario = tmp_path / "nodeport-source-ip.yaml"
    scenario.write_text(text.replace("        outcome: dropped\n", "        outcome: delivered\n"))
    run = lab_run(str(scenario), "--matrix", "proxyMode=iptables,nftables", "--html", str(report), "--pcap", str(pcaps))
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    page = report / "index.html"
    assert f"report: {page}" in run.stderr
    dom, console = browse(page, tmp_path / "report.png")
    assert console == [], console
    probes = 12  # 3 probes x 2 modes x 2 policies
    assert dom.count("<svg") == probes + 1  # the scenario's topology, then each probe's path over it
    assert dom.count('<article class="probe pass"') == probes - 2 and dom.count('<article class="probe fail"') == 2
    assert dom.count('class="hops"') == probes and dom.count('class="rules"') == probes
    assert '<table class="compare">' in dom and ">iptables<" in dom and ">nftables<" in dom
    # The failures first, each a link to its probe's account; the same in the comparison, in red.
    failures = re.search(r'<section class="failures"><h2>2 failed</h2><ul>(.*?)</ul></section>', dom)
    assert failures and dom.index('class="failures"') < dom.index('<table class="compare">')
    targets = re.findall(r'<li><a href="#([^"]+)">', failures.group(1))
    assert len(targets) == 2 and all(f'<article class="probe fail" id="{t}">' in dom for t in targets)
    cells = re.findall(r'<td class="fail"><a href="#([^"]+)">dropped FAIL</a></td>', dom)
    assert sorted(cells) == sorted(targets)
    # In each failed probe, the rule that dropped it (iptables: KUBE-EXTERNAL-SERVICES; nftables: its drop).
    for target in targets:
        article = dom[dom.index(f'id="{target}"') :].split("</article>", 1)[0]
        assert article.count('<tr class="dropper">') == 1 and "dropped it" in article, article[-3000:]
    links = re.findall(r'href="(pcaps/[^"]+\.pcap)"', dom)
    assert links and all((report / link).is_file() for link in links)
    width, height = png_size(tmp_path / "report.png")
    assert (width, height) == (1300, 2600) and (tmp_path / "report.png").stat().st_size > 50_000


def test_every_connection_of_an_ecmp_probe_is_drawn(tmp_path, host_unchanged):
    """metallb-bgp-ipip's client-via-router sends 12 connections that a router spreads over three nodes: each
    one's path is drawn (numbered on the edges of its route) and has its own hop table."""
    report = tmp_path / "report"
    scenario = REPO / "topologies" / "metallb-bgp-ipip.yaml"
    variant = ["--variant", "proxyMode=iptables", "--variant", "externalTrafficPolicy=Cluster"]
    run = lab_run(str(scenario), *variant, "--probe", "client-via-router", "--html", str(report))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    dom, console = browse(report / "index.html", tmp_path / "report.png")
    assert console == [], console
    article = dom[dom.index('<article class="probe pass"') :].split("</article>", 1)[0]
    captions = re.findall(r"<caption>connection #(\d+)</caption>", article)
    assert captions == [str(k) for k in range(1, 13)], captions
    # Every connection's number on an edge of the drawing (dot writes each label as an SVG text).
    drawn = {int(k) for label in re.findall(r">((?:#\d+ ?)+)</text>", article) for k in re.findall(r"#(\d+)", label)}
    assert drawn == set(range(1, 13)), drawn
