"""lab replay on the real kernel: a ruleset, one packet, what happened."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.builders import ep, svc
from support.cases import FAKE, NODE_IPS, render
from support.host import REPO
from support.netns import FreshNetns

from lab.describe.load import load_scenario
from lab.install.tools import InstallError
from lab.render.dataplane import node_dataplane
from lab.replay.env import Setup
from lab.replay.run import replay

FIXTURES = REPO / "tests" / "fixtures" / "replay"
NODE = ("192.168.0.2",)
POD_CIDR = "10.0.1.0/24"


def setup(source: str, dst: str, port: int, protocol: str = "TCP") -> Setup:
    return Setup(NODE, POD_CIDR, source, dst, port, protocol, ())


@pytest.fixture(scope="module")
def two_endpoints() -> str:
    return (FIXTURES / "two-endpoints.rules").read_text()


@pytest.mark.parametrize(
    ("source", "dst", "port", "protocol", "output", "masq", "outcome"),
    [
        # from a pod: both endpoints found behind -m statistic, source kept (it is inside the cluster CIDR)
        ("10.0.1.7", "172.30.0.41", 80, "TCP", "10.0.1.5:8080, 10.180.0.1:80", False, "dnat"),
        # from outside: masqueraded by the ClusterIP's "! -s 10.0.0.0/8 -j KUBE-MARK-MASQ"
        ("203.0.113.9", "172.30.0.41", 80, "TCP", "10.0.1.5:8080, 10.180.0.1:80", True, "dnat"),
        # from the node itself: its own address is outside the cluster CIDR, so masqueraded too
        ("192.168.0.2", "172.30.0.41", 80, "TCP", "10.0.1.5:8080, 10.180.0.1:80", True, "dnat"),
        # the hairpin endpoint reaching its own Service: KUBE-SEP's -s <ep> masquerade
        ("10.0.1.5", "172.30.0.41", 80, "TCP", "10.0.1.5:8080, 10.180.0.1:80", True, "dnat"),
        ("10.0.1.7", "172.30.0.49", 80, "TCP", "REJECT", False, "rejected"),
        ("10.0.1.7", "192.168.0.2", 22, "TCP", "", False, "local"),
        ("10.0.1.7", "198.51.100.1", 53, "UDP", "", False, "forwarded"),
        # not NATed, answered where it was sent: a pod on cni0, and an address beyond the uplink (from outside)
        ("10.0.1.7", "10.0.1.9", 80, "TCP", "", False, "forwarded"),
        ("203.0.113.9", "198.51.100.1", 80, "TCP", "", False, "forwarded"),
    ],
)
def test_replay_two_endpoints(two_endpoints, source, dst, port, protocol, output, masq, outcome):
    result = replay(two_endpoints, setup(source, dst, port, protocol))
    assert (result.output, result.masq, result.outcome) == (output, masq, outcome), result.as_json()


def test_an_endpoint_chain_that_drops_is_one_choice_of_the_set_every_run(two_endpoints):
    """An edited dump that drops what its second endpoint's chain DNATs: which endpoint the first connection drew
    once decided the answer ("dropped" after 1 attempt, or "DNATed" after several); now every choice is drawn, and
    five runs say the same."""
    reject = '-A KUBE-SERVICES -m comment --comment "ns9/svc9:p80 has no endpoints"'
    drop = "-A KUBE-SERVICES -d 10.0.1.5/32 -p tcp -m tcp --dport 8080 -j DROP\n"
    edited = two_endpoints.replace(reject, drop + reject)
    assert edited != two_endpoints
    said = {
        (r.outcome, r.output, r.endpoints, r.choices, r.trace)
        for r in (replay(edited, setup("10.0.1.7", "172.30.0.41", 80)) for _ in range(5))
    }
    assert len(said) == 1, said
    outcome, output, endpoints, choices, trace = said.pop()
    assert (outcome, output, endpoints, choices) == ("dnat|dropped", "10.180.0.1:80, DROP", ("10.180.0.1:80",), 2)
    assert any("KUBE-SEP-A" in line for line in trace), trace  # the DNAT's rules, whichever choice came first


def test_hairpin_source_seen_is_the_bridge_for_the_local_endpoint(two_endpoints):
    result = replay(two_endpoints, setup("10.0.1.5", "172.30.0.41", 80))
    assert "10.0.1.1" in result.source_seen, result.as_json()


def test_trace_names_the_reject_rule(two_endpoints):
    result = replay(two_endpoints, setup("10.0.1.7", "172.30.0.49", 80))
    assert any("has no endpoints" in line and "REJECT" in line for line in result.trace), result.trace


def test_rendered_node_rules_replay_like_the_scenario():
    """Report 1 through replay: node2's own rules, a pod on node2, the LB IP."""
    scenario = load_scenario(REPO / "topologies" / "lb-local-from-pods.yaml", {"proxyMode": ["iptables"]})
    for topo in scenario.variants:
        rules = node_dataplane(topo, "node2").iptables
        knows_cidr = dict(topo.variant)["kubeProxyClusterCIDR"]
        result = replay(rules, Setup(("192.168.56.12",), "10.244.2.0/24", "10.244.2.2", "203.0.113.10", 80, "TCP", ()))
        if knows_cidr:
            expected = ("10.244.1.2:80", "dnat")
        elif int(topo.cluster.kube_version.split(".")[1]) >= 25:
            expected = ("DROP", "dropped")  # filter KUBE-EXTERNAL-SERVICES "has no local endpoints"
        else:
            expected = ("", "forwarded")  # only KUBE-MARK-DROP's mark, which nothing drops on FORWARD
        assert (result.output, result.outcome) == expected, result.as_json()


def test_iptables_save_c_output_replays_as_without_counters(two_endpoints, host_unchanged):
    """What `iptables-save -c` writes (each rule after its counters, the form `lab up`'s hints suggest) replays as
    iptables-save's: the counters dropped, the same rules walked."""
    with FreshNetns() as netns:
        loaded = netns.run("iptables-restore", input=two_endpoints)
        assert loaded.returncode == 0, loaded.stderr
        saved = netns.run("iptables-save -c").stdout
    assert "\n[0:0] -A KUBE-SVC-X " in saved, saved
    result = replay(saved, setup("10.0.1.7", "172.30.0.41", 80))
    expected = ("10.0.1.5:8080, 10.180.0.1:80", False, "dnat")
    assert (result.output, result.masq, result.outcome) == expected, result.as_json()
    assert not any("[0:0]" in line for line in result.trace), result.trace


def test_malformed_dump_names_the_line():
    rules = "*filter\n:KUBE-SERVICES - [0:0]\n-A INPUT -j KUBE-SERVICES\n-A INPUT -m nosuchmatch -j ACCEPT\nCOMMIT\n"
    with pytest.raises(InstallError, match=r"line 4 of the rules: -A INPUT -m nosuchmatch"):
        replay(rules, setup("10.0.1.7", "192.168.0.2", 22))


def test_cli_json(tmp_path):
    argv = [
        sys.executable,
        "-m",
        "lab",
        "replay",
        "--rules",
        str(FIXTURES / "two-endpoints.rules"),
        "--node-ip",
        NODE[0],
        "--pod-cidr",
        POD_CIDR,
        "--from",
        "10.0.1.7",
        "--to",
        "172.30.0.49:80",
        "--json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert {"output", "masq", "outcome", "endpoints", "source_seen", "affinity", "trace", "added"} <= data.keys()
    assert (data["output"], data["masq"], data["outcome"]) == ("REJECT", False, "rejected")


def test_cli_refuses_a_dump_that_cannot_answer(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("")
    argv = [sys.executable, "-m", "lab", "replay", "--rules", str(empty), "--node-ip", NODE[0]]
    done = subprocess.run(
        [*argv, "--from", "10.0.0.2", "--to", "10.96.0.1:80"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert done.returncode == 2, done.stdout
    said = " ".join(done.stderr.split())
    assert said == f"error: --rules {empty}: it holds no iptables rules (empty, or only comments)"


def test_session_affinity_is_reported_and_every_endpoint_still_found():
    """ClientIP affinity over three endpoints (kube-proxy 1.31's rules, nfacct counters and all): the second
    connection from the client sticks; with the recent lists emptied between attempts all three answer."""
    endpoints = ("10.0.1.11", "10.0.1.12", "10.0.1.13")
    service = svc("ns1", "svc1", "172.30.0.41", affinity_timeout=600, endpoints=tuple(map(ep, endpoints)))
    rules = render([service], FAKE, NODE_IPS).restore_text()
    assert "-m nfacct" in rules
    result = replay(rules, setup("10.0.1.7", "172.30.0.41", 80))
    assert result.output == ", ".join(f"{ip}:80" for ip in endpoints), result.as_json()
    assert result.affinity is not None and result.affinity.sticky and result.affinity.seconds == 600
    assert result.affinity.endpoint in result.endpoints
    assert result.affinity.lists[0].startswith("KUBE-SEP-")


@pytest.mark.ipvs
def test_replay_ipvs_dumps_of_a_rendered_node():
    """node2 of report 1 in ipvs mode (1.31): its ipsets, iptables and virtual servers, replayed."""
    from lab.doctor import kernel_has, skip_reason

    for feature in ("ip_vs", "dummy"):
        if not kernel_has(feature):
            pytest.skip(skip_reason(feature))
    scenario = load_scenario(REPO / "topologies" / "lb-local-from-pods.yaml", {"proxyMode": ["ipvs"]})
    topo = next(t for t in scenario.variants if t.cluster.kube_version == "1.31")
    plane = node_dataplane(topo, "node2")
    setup = Setup(("192.168.56.12",), "10.244.2.0/24", "10.244.2.2", "203.0.113.10", 80, "TCP", ())
    result = replay(plane.iptables, setup, ipsets=plane.ipsets, ipvs=plane.ipvs)
    # 1.24+: no local endpoint, so the LB IP's virtual server falls back to every endpoint.
    assert (result.output, result.outcome) == ("10.244.1.2:80", "dnat"), result.as_json()
