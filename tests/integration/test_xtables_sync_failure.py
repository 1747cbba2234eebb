"""kube-proxy's iptables sync refused by iptables-restore, on the real kernel, with both iptables backends.

kube-proxy writes its filter table and then its nat table in one `iptables-restore --noflush` input
(syncProxyRules, pkg/proxy/iptables/proxier.go at kiarashazarnia/kubernetes@4426ed5d). iptables-restore commits
each table at its COMMIT line: when the nat table is refused, the filter table of that sync is already in the
kernel, and the nat table keeps what it had. No input of the lab's catalogue makes this kube-proxy's text refused
(its longest comment, "other traffic to NS/NAME:PORT will be dropped by KUBE-PROXY-FIREWALL", is at most 247
characters, and iptables 1.8.9 cuts a longer one to 255 without refusing it), so the refusal is planted: a jump
to a chain that does not exist (as kube-proxy once wrote, kubernetes#36652, "Couldn't load target") at the end of
the last table of every sync after the first (iptables mode: nat): the first sync succeeds and the sync after the
step is refused. What each probe sees is the kernel's own doing:

- the Service deleted with `doomed` still answers: its DNAT is in the nat table of the first sync, which stays;
- the Service `empty` (no endpoints) is deleted in the same step and is no longer refused: kube-proxy's REJECT for
  it was in the filter table, and the filter table is this sync's.

A refusal users meet (k3s-io/k3s#11098, easzlab/kubeasz#704): another program holds the xtables lock for longer
than kube-proxy's `-w 5`, and iptables-legacy-restore gives up before reading a line ("Another app is currently
holding the xtables lock. Stopped waiting after 5s."): both tables keep what they had, so the deleted Services
are served and rejected as before. (iptables-nft takes no lock.) The lab's lock is a private file here
(XTABLES_LOCKFILE), so that no other iptables user of this machine waits.

ipvs mode (under `lab vm`) writes nat, then filter, and syncs IPVS before its restore: when the filter table is
refused, the deleted Services' virtual servers and kube-ipvs0 addresses stay (kube-proxy removes them only after a
restore that succeeded): `doomed` still answers, and `empty`, a virtual server without a real server, is still
refused by IPVS.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import replace

import pytest
from plumbum import local

import lab
from lab import pipeline
from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.install import dataplane as install

SCENARIO = """\
name: xtables-sync-failure
cluster: {clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/16, underlay: 192.168.56.0/24, proxyMode: iptables,
          kubeVersion: "1.35"}
matrix:
  proxyMode: [iptables]  # ipvs: its own test, under lab vm
  iptablesBackend: [nft, legacy]
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
workload:
  - kind: Pod
    metadata: {name: web, labels: {app: web}}
    spec: {nodeName: node1, containers: [{name: web, ports: [{containerPort: 8080}]}]}
  - kind: Pod
    metadata: {name: client}
    spec: {nodeName: node1, containers: [{name: client}]}
  - kind: Service
    metadata: {name: doomed}
    spec: {clusterIP: 10.96.0.20, selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}
  - kind: Service
    metadata: {name: empty}
    spec: {clusterIP: 10.96.0.30, selector: {app: none}, ports: [{port: 80}]}
probes:
  - name: doomed-before
    from: client
    to: {service: doomed, port: 80}
    expect: {outcome: delivered, backend: web}
  - name: empty-before
    from: client
    to: {service: empty, port: 80}
    expect: {outcome: refused}
  - name: doomed-after
    before: [{delete: Service/doomed}, {delete: Service/empty}]
    from: client
    to: {address: 10.96.0.20, port: 80}
    expect: {outcome: delivered, backend: web}
  - name: empty-after
    from: client
    to: {address: 10.96.0.30, port: 80}
    expect:
      - when: {proxyMode: ipvs}
        outcome: refused
      - {outcome: unreachable}
"""
PLANTED = "-A INPUT -j KUBE-NOSUCHCHAIN"


@pytest.fixture
def resyncs_refused(monkeypatch):
    """Every sync after the first is given a line the kernel refuses at the end of its restore input's last table
    (the real tool refuses it; the lab's install does nothing else)."""
    planned = pipeline.plan_sync

    def planted(before, after, node, state, restart=False):
        plan = planned(before, after, node, state, restart)
        return replace(plan, dataplane=replace(plan.dataplane, iptables=_planted(plan.dataplane.iptables)))

    monkeypatch.setattr(pipeline, "plan_sync", planted)


def test_a_refused_nat_table_keeps_the_old_one_and_the_filter_table_is_this_syncs(
    resyncs_refused, host_unchanged, tmp_path, own_namespaces
):
    path = tmp_path / "xtables-sync-failure.yaml"
    path.write_text(SCENARIO)
    for topo in load_scenario(path).variants:
        backend = topo.cluster.iptables_backend
        results = {result.probe.name: result.observed for result in run_variant(topo).results}
        for name in ("doomed-before", "empty-before"):
            assert "sync failed" not in results[name].explanation, (backend, results[name])
        assert results["doomed-before"].outcome == "delivered", (backend, results["doomed-before"])
        assert results["empty-before"].outcome == "refused", (backend, results["empty-before"])
        doomed, empty = results["doomed-after"], results["empty-after"]
        assert doomed.outcome == "delivered" and doomed.backend == "web", (backend, doomed)
        assert empty.outcome == "unreachable", (backend, empty)
        for observed in (doomed, empty):
            why = observed.explanation
            assert why.startswith("kube-proxy's iptables sync failed on node1: "), (backend, why)
            assert f"iptables-{backend}-restore refused line" in why and "in the nat table" in why, why
            assert "KUBE-NOSUCHCHAIN" in why, why
            assert "the filter table is this sync's; the nat table keeps what it had before this sync" in why, why
    assert own_namespaces() == []


@pytest.mark.ipvs
def test_ipvs_keeps_a_deleted_services_virtual_server_when_its_restore_fails(
    resyncs_refused, host_unchanged, tmp_path, own_namespaces
):
    path = tmp_path / "xtables-sync-failure.yaml"
    path.write_text(SCENARIO)
    (topo,) = load_scenario(path, {"proxyMode": ["ipvs"], "iptablesBackend": ["nft"]}).variants
    run = run_variant(topo)
    if run.skipped:  # no ip_vs here: `lab vm run -- .venv/bin/pytest -m ipvs THIS_FILE`
        pytest.skip(run.skipped)
    results = {result.probe.name: result.observed for result in run.results}
    assert results["doomed-after"].outcome == "delivered" and results["doomed-after"].backend == "web"
    assert results["empty-after"].outcome == "refused", results["empty-after"]  # no real server: IPVS refuses
    for name in ("doomed-after", "empty-after"):
        why = results[name].explanation
        assert why.startswith("kube-proxy's ipvs sync failed on node1: "), why
        assert "in the filter table" in why and "the nat table is this sync's" in why, why
        assert "virtual servers and kube-ipvs0 addresses of deleted Services stay" in why, why
    assert own_namespaces() == []


@pytest.fixture
def lock_held_during_resyncs(monkeypatch, tmp_path):
    """Another program holds the xtables lock while each sync after the first runs (flock(1) on the lock file,
    as iptables does), and lets it go once the sync is over."""
    lock = tmp_path / "xtables.lock"
    lock.touch()
    apply = install.apply

    def held(ns, plan, *rest):
        holder = subprocess.Popen(["flock", "--exclusive", str(lock), "sleep", "60"])
        try:
            while subprocess.run(["flock", "--nonblock", str(lock), "true"], check=False).returncode == 0:
                time.sleep(0.05)  # until the holder has it
            return apply(ns, plan, *rest)
        finally:
            holder.terminate()
            holder.wait()

    monkeypatch.setattr(install, "apply", held)
    with local.env(XTABLES_LOCKFILE=str(lock)):  # the environment the lab runs its tools with
        yield


def test_the_xtables_lock_held_past_kube_proxys_wait_leaves_every_table(
    lock_held_during_resyncs, host_unchanged, tmp_path, own_namespaces
):
    path = tmp_path / "xtables-sync-failure.yaml"
    path.write_text(SCENARIO)
    (topo,) = load_scenario(path, {"iptablesBackend": ["legacy"]}).variants
    results = {result.probe.name: result.observed for result in run_variant(topo).results}
    assert results["doomed-after"].outcome == "delivered" and results["doomed-after"].backend == "web"
    assert results["empty-after"].outcome == "refused", results["empty-after"]
    for name in ("doomed-after", "empty-after"):
        why = results[name].explanation
        assert why.startswith("kube-proxy's iptables sync failed on node1: iptables-legacy-restore refused the whole")
        assert "Another app is currently holding the xtables lock. Stopped waiting after 5s." in why, why
        assert "the filter table keeps what it had before this sync; the nat table keeps what it had" in why, why
    assert own_namespaces() == []


HOST_RULES = """\
*filter
-A FORWARD -s 203.0.113.7/32 -m comment --comment host-filter -j DROP
COMMIT
*nat
-A POSTROUTING -s 203.0.113.7/32 -m comment --comment host-nat -j RETURN
COMMIT
"""


@pytest.fixture
def first_sync_refused(monkeypatch):
    """The first sync's restore input planted as resyncs_refused plants the later ones'."""
    rendered = pipeline.render

    def planted(topo):
        planes = rendered(topo)
        return {node: replace(plane, iptables=_planted(plane.iptables)) for node, plane in planes.items()}

    monkeypatch.setattr(pipeline, "render", planted)


def _planted(text: str) -> str:
    head, _, tail = text.rpartition("COMMIT")
    return f"{head}{PLANTED}\nCOMMIT{tail}"


@pytest.mark.parametrize("backend", ["nft", "legacy"])
def test_the_hosts_rules_stand_once_in_the_tables_a_refused_sync_kept(
    backend, first_sync_refused, resyncs_refused, host_unchanged, tmp_path, own_namespaces
):
    """The host's rules in kube-proxy's backend (cluster.tools.host.iptablesRules): the lab loads kube-proxy's
    tables whole and adds the host's rules again to those its restore replaced. Every sync refused in the nat
    table: the filter table is the sync's (the host's filter rule added again after it), the nat table keeps what
    it had, the host's nat rule among it, which stands once, not once more per sync."""
    tools = "{host: {iptablesRules: " + json.dumps(HOST_RULES) + "}}"
    text = SCENARIO.replace('kubeVersion: "1.35"}', f'kubeVersion: "1.35",\n          tools: {tools}}}')
    path = tmp_path / "xtables-sync-failure.yaml"
    path.write_text(text)
    with lab.up(path, variant={"iptablesBackend": backend}) as cluster:
        node = cluster["node1"]

        def counted() -> tuple[int, int]:
            saved = node.exec([f"iptables-{backend}-save"]).stdout
            return saved.count("--comment host-filter"), saved.count("--comment host-nat")

        first = counted()
        said = [line for done in cluster.step({"delete": "Service/doomed"}) for line in done.said]
        assert any("in the nat table" in line and "the filter table is this sync's" in line for line in said), said
        assert (first, counted()) == ((1, 1), (1, 1))
    assert own_namespaces() == []
