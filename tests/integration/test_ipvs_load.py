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
import time
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


def test_a_later_sync_changes_only_the_set_members_that_changed(host_unchanged):
    """set_changes is kube-proxy's syncIPSetEntries: on sets loaded by an earlier sync, the members read back from
    the kernel (`ipset save`) are compared with the rendered ones as they are written, so an unchanged Service
    changes nothing, and a moved endpoint is one member deleted and one added (never a set emptied and refilled)."""
    from support.host import REPO

    from lab.describe.load import load_scenario
    from lab.install.kernel_state import parse_set_members
    from lab.install.tools import ipset_apply, ipset_restore_all, run_command
    from lab.realize.build import realize
    from lab.render.dataplane import render, setups
    from lab.render.kubeproxy.ipvs_resync import set_changes

    topo = load_scenario(REPO / "topologies" / "hairpin.yaml").variants[0]
    first = render_ipvs(_services(), CONFIG, NODE_IPS, "1.31")
    moved = [
        replace(s, endpoints=(Endpoint("10.180.2.7", 80, is_local=True),)) if s.name == "clusterip" else s
        for s in _services()
    ]

    def sync(ns: str, text: str) -> list[str]:
        """The sets' changes read, planned and applied; the changes, without the creates of sets that exist."""
        changes = set_changes(text, parse_set_members(run_command(ns, ("ipset", "save"))))
        ipset_apply(ns, changes)
        return [line for line in changes if not line.startswith("create ")]

    with realize(topo, setups(render(topo)), tunnel="") as realized:
        ns = realized.namespaces["node1"]
        ipset_restore_all(ns, first.ipset_restore())
        assert sync(ns, first.ipset_restore()) == []
        changes = sync(ns, render_ipvs(moved, CONFIG, NODE_IPS, "1.31").ipset_restore())
        members = {line for line in run_command(ns, ("ipset", "save")).splitlines() if line.startswith("add ")}
    assert changes == [
        "del KUBE-LOOP-BACK 10.180.0.1,tcp:80,10.180.0.1",
        "add KUBE-LOOP-BACK 10.180.2.7,tcp:80,10.180.2.7",
    ], changes
    rendered = render_ipvs(moved, CONFIG, NODE_IPS, "1.31").ipset_restore().splitlines()
    assert members == {line for line in rendered if line.startswith("add ")}


@pytest.mark.ipvs
def test_a_later_sync_never_takes_a_services_address_off_kube_ipvs0(host_unchanged):
    """kube-proxy binds each Service's address if missing and unbinds only those no Service has any more: while
    an address is away the Service's packets are routed past IPVS and conntrack confirms an un-NATed entry (the
    pod then answers through a NAT clash, from another port). `ip monitor address` in the node sees every
    change a sync makes: none to the kept ClusterIP, one deletion for a deleted Service's."""
    from support.host import REPO

    from lab.describe.load import load_scenario
    from lab.doctor import kernel_has
    from lab.pipeline import kube_proxy_sync, standing
    from lab.probe.evidence.nftrace import MonitorLines

    if not kernel_has("ip_vs"):
        pytest.skip(NO_IP_VS)
    axes = {"proxyMode": ["ipvs"], "kubeVersion": ["1.31"]}
    (topo,) = load_scenario(REPO / "topologies" / "udp-zero-to-one.yaml", axes).variants
    step = topo.probes[0].before[0]  # Pod/dns not ready: the Service keeps its ClusterIP
    not_ready = replace(topo, pods=step.pods, services=step.services)
    dns = next(s for s in topo.services if s.name == "dns")
    deleted = replace(not_ready, services=tuple(s for s in not_ready.services if s.name != dns.name))
    with standing(topo) as stood:
        sync = kube_proxy_sync(stood.realized, stood.ports)
        node1 = stood.realized.namespaces["node1"]
        monitor = MonitorLines(node1, ("ip", "-o", "monitor", "address"))
        try:
            _address_barrier(monitor, node1)  # subscribed
            start = monitor.count()
            sync(topo, not_ready, False)
            _address_barrier(monitor, node1)  # every event of the sync has arrived (they come in order)
            kept = monitor.lines(start)
            start = monitor.count()
            sync(not_ready, deleted, False)
            _address_barrier(monitor, node1)
            gone = monitor.lines(start)
        finally:
            monitor.close()
    assert [line for line in kept if "kube-ipvs0" in line] == [], kept
    deletions = [line for line in gone if line.startswith("Deleted") and "kube-ipvs0" in line]
    assert len(deletions) == 1 and f"inet {dns.cluster_ip}/32 " in deletions[0], gone


def _address_barrier(monitor, ns: str) -> None:
    """A marker address added to the node's lo and deleted, until `ip monitor` has reported both: every event
    before them has been read (a monitor not yet subscribed misses the marker, which is then added again)."""
    from lab.install.tools import run_command

    marker = "127.0.0.9/32"
    for _ in range(40):
        start = monitor.count()
        run_command(ns, ("ip", "addr", "add", marker, "dev", "lo"))
        seen = monitor.wait_for(marker, start, timeout=0.5)
        run_command(ns, ("ip", "addr", "del", marker, "dev", "lo"))
        if seen:
            deadline = time.monotonic() + 20
            while not any(line.startswith("Deleted") and marker in line for line in monitor.lines(start)):
                assert time.monotonic() < deadline, monitor.lines(start)
                time.sleep(0.01)
            return
    raise AssertionError("ip monitor address never reported the marker address")


# --- the IPv6 proxier, and a dual-stack node's two ------------------------------------------------------------


def _v6(text: str) -> str:
    """An IPv4 address or CIDR of these cases in IPv6: 127.0.0.1 is ::1, a.b.c.d is fd00::a:b:c:d and a /n a /96+n,
    so that what holds what is kept (the node IP stays inside the LB's source ranges)."""
    address, _, prefix = text.partition("/")
    mapped = "::1" if address == "127.0.0.1" else "fd00::" + ":".join(address.split("."))
    return f"{mapped}/{96 + int(prefix)}" if prefix else mapped


def _in_ipv6(port: ServicePort) -> ServicePort:
    return replace(
        port,
        cluster_ip=_v6(port.cluster_ip or ""),
        external_ips=tuple(map(_v6, port.external_ips)),
        load_balancer_ips=tuple(map(_v6, port.load_balancer_ips)),
        load_balancer_source_ranges=tuple(map(_v6, port.load_balancer_source_ranges)),
        endpoints=tuple(replace(ep, ip=_v6(ep.ip)) for ep in port.endpoints),
    )


NODE_IPS6 = tuple(map(_v6, NODE_IPS))
CONFIG6 = ProxyConfig(family="IPv6", cluster_cidr=_v6("10.0.0.0/8"))
LOAD6 = LOAD.replace("iptables-restore", "ip6tables-restore").replace("iptables-save", "ip6tables-save")


def _services6() -> list[ServicePort]:
    """_services() as the IPv6 proxier's, every address mapped into IPv6."""
    return [_in_ipv6(port) for port in _services()]


@pytest.mark.parametrize("version", ["1.20", "1.24", "1.26", "1.31", "1.37"])
def test_ipv6_ipsets_and_ip6tables_load(version, tmp_path, fresh_netns, host_unchanged):
    """The IPv6 proxier's inet6 sets (KUBE-6-...) with ipset restore, then its rules with ip6tables-restore; read back
    the same. ipset save prints each member as the proxier wrote it, so a later sync finds nothing to change."""
    from lab.install.kernel_state import parse_set_members
    from lab.render.kubeproxy.ipvs_resync import set_changes

    rules = render_ipvs(_services6(), CONFIG6, NODE_IPS6, version)
    assert "-m ipvs" not in rules.iptables_restore()
    output = _run_in_fresh_netns(fresh_netns, tmp_path, rules, LOAD6)
    _check_loaded(rules, output)
    changes = set_changes(rules.ipset_restore(), parse_set_members(output.split("%%%\n")[0]))
    assert all(line.startswith("create ") for line in changes), changes


def test_a_dual_stack_nodes_two_proxiers_sets_and_rules_load_side_by_side(tmp_path, fresh_netns, host_unchanged):
    """Both proxiers' sets in one namespace (their names differ: KUBE-... and KUBE-6-...), each family's rules in
    its own tables (iptables-restore, ip6tables-restore)."""
    v4, v6 = render_ipvs(_services(), CONFIG, NODE_IPS, "1.31"), render_ipvs(_services6(), CONFIG6, NODE_IPS6, "1.31")
    (tmp_path / "ipset4").write_text(v4.ipset_restore())
    (tmp_path / "ip4").write_text(v4.iptables_restore())
    (tmp_path / "ipset6").write_text(v6.ipset_restore())
    (tmp_path / "ip6").write_text(v6.iptables_restore())
    script = (
        'ipset restore < "$1/ipset4"\nipset restore < "$1/ipset6"\niptables-restore < "$1/ip4"\n'
        'ip6tables-restore < "$1/ip6"\nipset save\necho "%%%"\niptables-save\necho "%%%"\nip6tables-save\n'
    )
    done = fresh_netns.run(script, str(tmp_path))
    assert done.returncode == 0, done.stderr
    sets, saved4, saved6 = done.stdout.split("%%%\n")
    assert _saved_sets(sets) == {s.name: set(s.entries) for s in (*v4.ipsets, *v6.ipsets)}
    assert jump_shape(saved4) == jump_shape(v4.iptables_restore())
    assert jump_shape(saved6) == jump_shape(v6.iptables_restore())
