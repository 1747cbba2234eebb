"""The kernel accepts what render_ipvs() writes, in a throw-away network namespace only.

Each case loads ipset_restore() with `ipset restore`, then iptables_restore() with iptables-restore
(the "-m set" matches need the sets first), inside a network namespace of the test's own
(support.netns), and reads both back there: the same sets with the same entries, and per chain the
same jump targets in the same order. The host's own netns is never touched (host_unchanged checks it, ipsets included).

Without ip_vs (no CONFIG_IP_VS) the ipvsadm-restore text is only parsed, and the "-m ipvs" rule of
KUBE-IPVS-OUT-FILTER (1.29+, needs xt_ipvs) cannot load, so the scenarios keep the node IP inside
the LoadBalancer source ranges. The test marked `ipvs` loads everything, ipvsadm-restore and the
kube-ipvs0 dummy addresses included; it runs under `lab vm run`.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.goldens import jump_shape
from support.netns import FreshNetns

from lab.render.kubeproxy.ipvs import IPVS_VERSIONS, IpvsRules, render_ipvs
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

NODE_IPS = ("192.168.0.2", "127.0.0.1", "192.168.1.2", "192.168.99.3")
CONFIG = ProxyConfig(cluster_cidr="10.0.0.0/8")
NO_IP_VS = "kernel has no ip_vs: run under `lab vm run`"


def _services(source_ranges: tuple[str, ...] = ("192.168.0.0/24", "203.0.113.0/25")) -> list[ServicePort]:
    local, remote = Endpoint("10.180.0.1", 80, is_local=True), Endpoint("10.180.1.1", 80, is_local=False)
    terminating = Endpoint("10.180.0.9", 80, is_local=True, ready=False, terminating=True)
    return [
        ServicePort("ns1", "clusterip", "p80", "TCP", 80, "172.30.0.41", endpoints=(local, remote)),
        ServicePort("ns1", "dns", "udp", "UDP", 53, "172.30.0.10", node_port=30053,
                    endpoints=(replace(local, port=53),)),
        ServicePort("ns1", "sctp", "", "SCTP", 9, "172.30.0.11", node_port=30009, external_policy="Local",
                    endpoints=(replace(remote, port=9),)),
        ServicePort("ns1", "empty", "p80", "TCP", 80, "172.30.0.42", node_port=30001, external_ips=("192.168.99.1",)),
        ServicePort(
            "ns2", "lb-local", "p80", "TCP", 80, "172.30.0.43", node_port=30002, external_ips=("192.168.99.2",),
            load_balancer_ips=("1.2.3.4",), load_balancer_source_ranges=source_ranges,
            external_policy="Local", health_check_node_port=32000, affinity_timeout=10800,
            endpoints=(remote, terminating),
        ),
        ServicePort(
            "ns2", "itp-local", "p80", "TCP", 80, "172.30.0.44", node_port=30003, load_balancer_ips=("5.6.7.8",),
            external_ips=("192.168.99.3",), internal_policy="Local", endpoints=(remote,),
        ),
    ]  # fmt: skip


CONFIGS = {
    "detector": CONFIG,
    "no detector, masquerade-all, nodeport addresses": replace(
        CONFIG, cluster_cidr=None, masquerade_all=True, node_port_addresses=("192.168.0.0/16",), random_fully=False
    ),
    "no detector": replace(CONFIG, cluster_cidr=None),
}
CASES = [(version, "detector") for version in IPVS_VERSIONS]
CASES += [(version, name) for version in ("1.20", "1.24", "1.31") for name in list(CONFIGS)[1:]]


@pytest.fixture(autouse=True)
def _tools():
    needed = ("unshare", "nsenter", "ipset", "iptables-restore", "iptables-save")
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (util-linux, ipset, iptables)")


def _run_in_fresh_netns(netns: FreshNetns, tmp_path: Path, rules: IpvsRules, script: str) -> str:
    """Write the three inputs to files and run `script` in the test's own network namespace."""
    (tmp_path / "ipset").write_text(rules.ipset_restore())
    (tmp_path / "iptables").write_text(rules.iptables_restore())
    (tmp_path / "ipvsadm").write_text(rules.ipvsadm_restore())
    done = netns.run(script, str(tmp_path))
    assert done.returncode == 0, f"the kernel refused the rules:\n{done.stderr}\n{rules.iptables_restore()}"
    return done.stdout


LOAD = 'ipset restore < "$1/ipset"\niptables-restore < "$1/iptables"\nipset save\necho "%%%"\niptables-save\n'


def _saved_sets(dump: str) -> dict[str, set[str]]:
    sets: dict[str, set[str]] = {}
    for line in dump.splitlines():
        words = line.split()
        if words[:1] == ["create"]:
            sets[words[1]] = set()
        elif words[:1] == ["add"]:
            sets[words[1]].add(words[2])
    return sets


def _check_loaded(rules: IpvsRules, output: str) -> None:
    ipset_dump, iptables_dump = output.split("%%%\n")
    assert _saved_sets(ipset_dump) == {s.name: set(s.entries) for s in rules.ipsets}
    assert jump_shape(iptables_dump) == jump_shape(rules.iptables_restore())


@pytest.mark.parametrize(("version", "config"), CASES, ids=[f"{v}-{c}" for v, c in CASES])
def test_ipsets_and_iptables_load(version, config, tmp_path, fresh_netns, host_unchanged):
    rules = render_ipvs(_services(), CONFIGS[config], NODE_IPS, version)
    assert "-m ipvs" not in rules.iptables_restore()
    _check_loaded(rules, _run_in_fresh_netns(fresh_netns, tmp_path, rules, LOAD))


IPVSADM_LINE = re.compile(
    r"^-A (-t|-u|--sctp-service) (\d+\.\d+\.\d+\.\d+):(\d+) -s rr( -p \d+)?$"
    r"|^-a (-t|-u|--sctp-service) (\d+\.\d+\.\d+\.\d+):(\d+) -r (\d+\.\d+\.\d+\.\d+):(\d+) -m -w 1$"
)


@pytest.mark.parametrize("version", ["1.20", "1.31"])
def test_ipvsadm_restore_parses(version):
    """Without ip_vs the ipvsadm part is only checked for form: every line is an -A or -a that
    ipvsadm-restore reads, each -a after its -A, no virtual server twice."""
    rules = render_ipvs(_services(), CONFIG, NODE_IPS, version)
    seen: set[str] = set()
    for line in rules.ipvsadm_restore().splitlines():
        assert IPVSADM_LINE.match(line), line
        service = " ".join(line.split()[1:3])
        if line.startswith("-A"):
            assert service not in seen, f"virtual server twice: {line}"
            seen.add(service)
        else:
            assert service in seen, f"real server before its virtual server: {line}"
    # NodePort virtual servers on every node address (<= 1.21 including 127.0.0.1).
    node_ports = {" ".join(line.split()[1:3]) for line in rules.ipvsadm_restore().splitlines() if ":30001 " in line}
    expected = [ip for ip in NODE_IPS if version == "1.20" or ip != "127.0.0.1"]
    assert node_ports == {f"-t {ip}:30001" for ip in expected}


def _ipvs_state(lines: list[str]) -> dict[str, tuple[str, set[str]]]:
    state: dict[str, tuple[str, set[str]]] = {}
    for line in lines:
        words = line.split()
        service = " ".join(words[1:3])
        if words[0] == "-A":
            state[service] = (" ".join(words[3:]), set())
        elif words[0] == "-a":
            state[service][1].add(" ".join(words[3:]))
    return state


@pytest.mark.ipvs
@pytest.mark.parametrize("version", ["1.20", "1.24", "1.31"])
def test_everything_loads_with_ip_vs(version, tmp_path, fresh_netns, host_unchanged):
    """ipsets, iptables (with 1.29+'s "-m ipvs" rule), the kube-ipvs0 dummy and its addresses, and
    ipvsadm-restore, all in one fresh namespace; ipvsadm-save -n gives back the same services."""
    from lab.doctor import kernel_has

    if not kernel_has("ip_vs"):
        pytest.skip(NO_IP_VS)
    rules = render_ipvs(_services(source_ranges=("203.0.113.0/25",)), CONFIG, NODE_IPS, version)
    addresses = " ".join(rules.dummy_addresses)
    script = (
        "ip link add kube-ipvs0 type dummy\n"
        f'for a in {addresses}; do ip addr add "$a" dev kube-ipvs0; done\n'
        + LOAD
        + 'echo "%%%"\nipvsadm-restore < "$1/ipvsadm"\nipvsadm-save -n\necho "%%%"\nip -4 -o addr show dev kube-ipvs0\n'
    )
    ipset_dump, iptables_dump, ipvs_dump, addr_dump = _run_in_fresh_netns(fresh_netns, tmp_path, rules, script).split(
        "%%%\n"
    )
    _check_loaded(rules, ipset_dump + "%%%\n" + iptables_dump)
    assert _ipvs_state(ipvs_dump.splitlines()) == _ipvs_state(rules.ipvsadm_restore().splitlines())
    bound = {line.split()[3] for line in addr_dump.splitlines()}
    assert bound == set(rules.dummy_addresses)
