"""lab replay --nft on the real kernel: an nftables dump, one packet, what happened."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.host import REPO

from lab.install.tools import InstallError
from lab.replay.env import Setup
from lab.replay.run import replay_nft

FIXTURES = REPO / "tests" / "fixtures" / "replay"
NFT_DUMP = FIXTURES / "two-endpoints.nft"  # nft list ruleset
NODE = "192.168.0.2"
POD_CIDR = "10.0.1.0/24"
BOTH = "10.0.1.5:8080, 10.180.0.1:80"


def setup(source: str, dst: str, port: int, protocol: str = "TCP") -> Setup:
    return Setup((NODE,), POD_CIDR, source, dst, port, protocol, ())


def lab_replay(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "lab", "replay", "--node-ip", NODE, "--pod-cidr", POD_CIDR, *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False)


@pytest.mark.parametrize(
    ("source", "dst", "port", "output", "masq", "outcome"),
    [
        # both endpoints found behind `numgen random mod 2`, source kept (inside the detector's 10.0.0.0/8)
        ("10.0.1.7", "172.30.0.41", 80, BOTH, False, "dnat"),
        # from outside: "ip saddr != 10.0.0.0/8 jump mark-for-masquerade"
        ("203.0.113.9", "172.30.0.41", 80, BOTH, True, "dnat"),
        # the node itself: nat-output, and its address is outside the detector's CIDR
        (NODE, "172.30.0.41", 80, BOTH, True, "dnat"),
        ("10.0.1.7", "172.30.0.49", 80, "REJECT", False, "rejected"),
        ("10.0.1.7", NODE, 22, "", False, "local"),
    ],
)
def test_replay_nft_dump(source, dst, port, output, masq, outcome):
    result = replay_nft(NFT_DUMP.read_text(), setup(source, dst, port))
    assert (result.output, result.masq, result.outcome) == (output, masq, outcome), result.as_json()


def test_trace_is_the_first_packets_path_and_names_the_reject():
    result = replay_nft(NFT_DUMP.read_text(), setup("10.0.1.7", "172.30.0.49", 80))
    assert result.trace[-2:] == (
        "kube-proxy service-endpoints-check: ip daddr . meta l4proto . th dport vmap @no-endpoint-services "
        "(verdict goto reject-chain)",
        "kube-proxy reject-chain: reject (verdict drop)",
    ), result.trace
    assert result.trace[0].startswith("kube-proxy filter-prerouting-pre-dnat: "), result.trace


def test_udp_datagram_is_traced():
    """The UDP probe's datagram is told from the rest by the client's port: 53/udp has no Service, so
    cluster-ips-check rejects it (and the trace shows it)."""
    result = replay_nft(NFT_DUMP.read_text(), setup("10.0.1.7", "172.30.0.41", 53, "UDP"))
    assert (result.output, result.outcome) == ("REJECT", "rejected"), result.as_json()
    assert result.trace[-1].startswith("kube-proxy cluster-ips-check: ip daddr @cluster-ips reject"), result.trace


def test_cli_nft_json():
    done = lab_replay("--nft", str(NFT_DUMP), "--from", "203.0.113.9", "--to", "172.30.0.41:80", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["output"], data["masq"], data["outcome"]) == (BOTH, True, "dnat")
    assert data["endpoints"] == ["10.0.1.5:8080", "10.180.0.1:80"]
    assert data["from"] == "203.0.113.9" and data["to"] == "172.30.0.41:80" and data["protocol"] == "tcp"
    assert data["attempts"] >= 2 and data["source_seen"]
    assert any("numgen random mod 2 vmap" in line for line in data["trace"]), data["trace"]
    assert any(line.endswith("masquerade fully-random (verdict accept)") for line in data["trace"]), data["trace"]


def test_cli_nft_and_rules_give_the_same_json_fields():
    """The same Services as two-endpoints.rules (iptables-save), so the same answer in the same form."""
    common = ("--from", "10.0.1.7", "--to", "172.30.0.49:80", "--json")
    nft = lab_replay("--nft", str(NFT_DUMP), *common)
    rules = lab_replay("--rules", str(FIXTURES / "two-endpoints.rules"), *common)
    assert nft.returncode == rules.returncode == 0, nft.stderr + rules.stderr
    nft_data, rules_data = json.loads(nft.stdout), json.loads(rules.stdout)
    assert nft_data.keys() == rules_data.keys()
    same = ("from", "to", "protocol", "output", "masq", "outcome", "endpoints", "source_seen", "attempts")
    assert {k: nft_data[k] for k in same} == {k: rules_data[k] for k in same}
    assert nft_data["trace"][-1] == "kube-proxy reject-chain: reject (verdict drop)"


def test_malformed_nft_dump_names_the_line():
    ruleset = (
        "table ip t {\n  chain c {\n    type nat hook prerouting priority dstnat;\n"
        "    ip daddr 1.2.3.4 tcp dport 80 dnat to 10.0.0.1:80 bogus\n  }\n}\n"
    )
    with pytest.raises(InstallError, match=r"nft rejected line 4 of the ruleset: ip daddr 1\.2\.3\.4 .* bogus\n"):
        replay_nft(ruleset, setup("10.0.1.7", "1.2.3.4", 80))


def test_cli_malformed_nft_dump(tmp_path):
    dump = tmp_path / "bad.nft"
    dump.write_text(
        "add table ip t\nadd chain ip t c { type filter hook input priority 0; }\n"
        "add rule ip t c ip daddr 1.2.3.4 jump nowhere\n"
    )
    done = lab_replay("--nft", str(dump), "--from", "10.0.1.7", "--to", "1.2.3.4:80")
    assert done.returncode == 2, done.stdout
    said = " ".join(done.stderr.split())  # the terminal wraps long lines
    assert "nft rejected line 3 of the ruleset: add rule ip t c ip daddr 1.2.3.4 jump nowhere" in said
    assert "/dev/stdin:3:" in said  # nft's own message follows


def test_cli_nft_is_exclusive_with_rules_and_takes_no_ipvs(tmp_path):
    rules = str(FIXTURES / "two-endpoints.rules")
    both = lab_replay("--nft", str(NFT_DUMP), "--rules", rules, "--from", "10.0.1.7", "--to", "172.30.0.41:80")
    assert both.returncode == 2 and "or an nftables node's --nft, not both" in " ".join(both.stderr.split())
    ipvs = tmp_path / "ipvs"
    ipvs.write_text("-A -t 172.30.0.41:80 -s rr\n")
    done = lab_replay("--nft", str(NFT_DUMP), "--ipvs", str(ipvs), "--from", "10.0.1.7", "--to", "172.30.0.41:80")
    assert done.returncode == 2 and "--ipvs goes with --rules" in " ".join(done.stderr.split())


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--to", "172.30.0.41", "--to 172.30.0.41: expected DST_IP:PORT with a port in 1-65535"),
        ("--from", "10.0.1.x", "--from: expected an IP address such as 192.168.56.10 or fd00:56::10, got '10.0.1.x'"),
        ("--from", "fd00::1%x", "--from: 'fd00::1%x' names a zone (after %): Kubernetes takes addresses without one"),
    ],
)
def test_cli_names_the_bad_option(option, value, message):
    args = {"--from": "10.0.1.7", "--to": "172.30.0.41:80", option: value}
    done = lab_replay("--nft", str(NFT_DUMP), *(x for pair in args.items() for x in pair))
    assert done.returncode == 2 and message in " ".join(done.stderr.split()), done.stderr
