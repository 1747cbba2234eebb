"""Who answered the client's ARP for a layer 2 VIP, read from the captured frames of the exchange, and the words a
result carries when more than one node answered (another run may enter elsewhere)."""

from __future__ import annotations

import struct
from dataclasses import replace

from support.scenario import BASE, ScriptedSession, write

from lab.describe.load import load_scenario
from lab.judge.attempts import run_probe
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.judge.verdict import Verdict
from lab.probe.arp import arp_answers, entry_warning
from lab.probe.capture import Frame
from lab.probe.observation import ArpAnswer, Observation
from lab.report.compare import compare_grid
from lab.report.html import _probe
from lab.report.records import evidence_lines, observed_text, to_record

VIP = "192.168.56.240"
CLIENT_MAC = bytes.fromhex("02aabbccdd99")
MACS = {
    "node1": bytes.fromhex("020000000001"),
    "node2": bytes.fromhex("020000000002"),
    "node3": bytes.fromhex("020000000003"),
}
NODES = tuple(MACS)
TIMING = Timing(build=0.0, install=0.0, probes=0.0, teardown=0.0)


def arp(oper: int, sender_mac: bytes, sender_ip: str, destination: bytes = CLIENT_MAC) -> bytes:
    ip = bytes(int(part) for part in sender_ip.split("."))
    head = destination + sender_mac + struct.pack("!H", 0x0806)
    return head + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, oper, sender_mac, ip, CLIENT_MAC, bytes(4))


def reply_from(node: str, at: float, address: str = VIP) -> list[Frame]:
    """A node's reply as the captures see it: leaving the node's eth0, then reaching the client's."""
    data = arp(2, MACS[node], address)
    return [Frame(node, "eth0", True, at, data), Frame("client", "eth0", False, at + 0.001, data)]


def test_every_answer_is_listed_in_the_order_the_client_got_them_with_the_node_that_sent_it():
    frames = reply_from("node3", 1.0) + reply_from("node1", 1.1) + reply_from("node1", 1.2) + reply_from("node2", 1.3)
    answers = arp_answers(frames, NODES, VIP)
    assert [(a.node, a.mac) for a in answers] == [
        ("node3", "02:00:00:00:00:03"),
        ("node1", "02:00:00:00:00:01"),
        ("node1", "02:00:00:00:00:01"),  # node1's kernel and its speaker both answered
        ("node2", "02:00:00:00:00:02"),
    ]
    assert entry_warning(answers, "node3") == (
        f"entered node3; node1 and node2 also answered ARP for {VIP}: another run may enter there"
    )


def test_other_frames_are_no_answers():
    request = arp(1, CLIENT_MAC, "192.168.56.100", destination=b"\xff" * 6)
    frames = [
        Frame("node1", "eth0", False, 0.9, request),  # the client's request reaching a node
        *reply_from("node2", 1.0, address="192.168.56.241"),  # an answer for another address
        Frame("node3", "eth0", False, 1.1, arp(2, MACS["node1"], VIP)),  # a reply a node received, not the client
        Frame("client", "eth0", False, 1.2, arp(2, MACS["node1"], VIP)[:30]),  # cut short
    ]
    assert arp_answers(frames, NODES, VIP) == ()
    assert arp_answers(reply_from("node1", 1.0), NODES, "fd00::240") == ()


def test_an_answer_no_capture_saw_leave_a_node_is_kept_and_named_by_its_mac():
    frames = [
        Frame("client", "eth0", False, 1.0, arp(2, bytes.fromhex("02ffffffff01"), VIP)),
        *reply_from("node1", 1.1),
    ]
    answers = arp_answers(frames, NODES, VIP)
    assert answers == (ArpAnswer(VIP, "02:ff:ff:ff:ff:01", None), ArpAnswer(VIP, "02:00:00:00:00:01", "node1"))
    assert "02:ff:ff:ff:ff:01 and node1 answered ARP" in entry_warning(answers, None)


def test_one_node_answering_says_nothing_more():
    answers = arp_answers(reply_from("node1", 1.0) + reply_from("node1", 1.1), NODES, VIP)
    assert len(answers) == 2
    assert entry_warning(answers, "node1") == ""


def answered(*nodes: str) -> tuple[ArpAnswer, ...]:
    return tuple(ArpAnswer(VIP, MACS[n].hex(":"), n) for n in nodes)


def test_the_result_says_another_run_may_enter_elsewhere(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    probe = topo.probes[0]
    seen = Observation("delivered", backend="web-0", source_ip="192.168.56.12", source="node2", entry="node2")
    flux = replace(seen, arp=answered("node2", "node1", "node3"))
    result = ProbeResult(topo, probe, flux, run_probe(ScriptedSession([flux]), probe, topo)[1])  # type: ignore[arg-type]
    said = "entered node2; node1 and node3 also answered ARP for 192.168.56.240: another run may enter there"
    assert observed_text(result).endswith(said)
    assert f"arp   {said}" in evidence_lines(result)
    assert f"arp   {VIP} is-at 02:00:00:00:00:01 from node1" in evidence_lines(result)
    html = _probe(result, tmp_path)
    assert f"ARP answers the client got, in order: {VIP} is-at 02:00:00:00:00:02 from node2; " in html
    assert said in html
    record = to_record(result)["observed"]
    assert record["entry"] == "node2"
    assert [a["node"] for a in record["arp"]] == ["node2", "node1", "node3"]
    alone = ProbeResult(topo, probe, replace(seen, arp=answered("node2")), result.verdict)
    assert "answered ARP" not in observed_text(alone)


def test_several_connections_keep_every_answer_and_say_which_nodes_they_entered(tmp_path):
    text = BASE.replace(
        "    expect: {outcome: delivered, source: node2}\n", "    attempts: 2\n    expect: {outcome: delivered}\n"
    )
    (topo,) = load_scenario(write(tmp_path, text)).variants
    first = Observation("delivered", backend="web-0", entry="node3", arp=answered("node3", "node1"))
    second = Observation("delivered", backend="web-0", entry="node1", arp=answered("node1", "node3"))
    observed, verdict = run_probe(ScriptedSession([first, second]), topo.probes[0], topo)  # type: ignore[arg-type]
    assert len(observed.arp) == 4
    assert any("#1 entered node3" in line and "ARP answered by node3, node1" in line for line in observed.path)
    text = observed_text(ProbeResult(topo, topo.probes[0], observed, verdict))
    assert "entered node1 and node3, each of which answered ARP" in text


def test_the_mode_comparison_says_another_run_may_enter_elsewhere(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    flux = Observation("delivered", entry="node3", arp=answered("node3", "node1"))
    result = ProbeResult(topo, topo.probes[0], flux, Verdict(True))
    _, [(_, _, (cell,), _)] = compare_grid([VariantRun(topo, [result], TIMING)], "proxyMode")
    assert "(entered node3; node1 also answered ARP for 192.168.56.240: another run may enter there) PASS" in cell.text
