"""Everyday cluster states the loader accepts: a Deployment scaled up from zero (a rolling update), a Service
that selects no pod yet, pods of one name in two namespaces; and every error it gives is said in words."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab import cli
from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario

ROLLING = Path(__file__).parents[2] / "topologies" / "rolling-update.yaml"


def _endpoints(step, service: str) -> set[str]:
    svc = next(s for s in step.services if s.name == service)
    return {ep.pod for port in svc.ports for ep in port.endpoints}


def test_a_replica_set_declared_with_none_scales_up_and_the_old_one_down():
    topo = load_scenario(ROLLING).variants[0]
    assert {p.name for p in topo.pods} == {"web-v1-0", "web-v1-1"}
    assert {p.name for p in topo.pending_pods} == {"web-v2-0", "web-v2-1", "api-0"}
    probes = {p.name: p for p in topo.probes}
    assert _endpoints(probes["v2-up-v1-half"].before[-1], "web") == {"web-v1-0", "web-v2-0"}
    last = probes["v2-only"].before[-1]
    assert _endpoints(last, "web") == {"web-v2-0", "web-v2-1"}
    assert {p.name for p in last.pods} == {"web-v2-0", "web-v2-1"}


def test_a_service_created_before_its_pods_has_no_endpoints_until_they_run():
    scenario = load_scenario(ROLLING)
    topo = scenario.variants[0]
    api = next(s for s in topo.services if s.name == "api")
    assert all(not port.endpoints for port in api.ports)
    probes = {p.name: p for p in topo.probes}
    assert probes["api-before-its-pods"].expected.outcome == "refused"
    assert _endpoints(probes["api-after-scale-up"].before[-1], "api") == {"api-0"}
    (warning,) = scenario.warnings
    assert "workload[3].spec.selector" in warning and "selects no pod running at the start" in warning


def test_lab_validate_warns_of_a_service_that_selects_no_pod(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["validate", str(ROLLING)])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "rolling-update.yaml: ok" in out and "warning:" in out and "Service api has no endpoints" in out


def test_scaling_a_deployment_with_no_replica_to_none_is_no_change(tmp_path):
    text = BASE.replace("replicas: 2", "replicas: 0").replace(
        "    to: {service: web,", "    before: [{scale: Deployment/web, replicas: 0}]\n    to: {service: web,"
    )
    text = text.replace("expect: {outcome: delivered, source: node2}", "expect: {outcome: refused}")
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert topo.pods == () and "no change" in topo.probes[0].before[0].text


def test_scaling_what_the_workload_lacks_names_what_it_has(tmp_path):
    text = BASE.replace(
        "    to: {service: web,", "    before: [{scale: Deployment/api, replicas: 1}]\n    to: {service: web,"
    )
    error = error_for(tmp_path, text)
    assert error.field == "probes[0].before[0].scale"
    assert "no Deployment default/api in the workload; it has Deployment/default/web" in error.message


TWO_NAMESPACES = """\
name: t
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
workload:
  - kind: Pod
    metadata: {name: web, namespace: a, labels: {app: web}}
    spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}
  - kind: Pod
    metadata: {name: web, namespace: b, labels: {app: web}}
    spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}
  - kind: Service
    metadata: {name: web, namespace: b}
    spec: {selector: {app: web}, ports: [{port: 80, targetPort: http}]}
probes:
  - name: p
    from: FROM
    to: {service: web, namespace: b, port: 80}
    expect: {backend: BACKEND}
"""


def test_pods_of_one_name_in_two_namespaces_are_told_apart(tmp_path):
    (topo,) = load_scenario(
        write(tmp_path, TWO_NAMESPACES.replace("FROM", "a/web").replace("BACKEND", "b/web"))
    ).variants
    assert {p.name for p in topo.pods} == {"a/web", "b/web"}
    (probe,) = topo.probes
    assert probe.source == "a/web" and probe.expected.backends == ("b/web",)
    svc = topo.services[0]
    assert [ep.pod for ep in svc.ports[0].endpoints] == ["b/web"]


@pytest.mark.parametrize(("source", "backend", "field"), [("web", "b/web", "from"), ("a/web", "web", "expect.backend")])
def test_a_bare_name_two_namespaces_use_is_refused_naming_both(tmp_path, source, backend, field):
    error = error_for(tmp_path, TWO_NAMESPACES.replace("FROM", source).replace("BACKEND", backend))
    assert error.field.startswith(f"probes[0].{field}"), str(error)
    assert "a/web and b/web" in error.message and "NAMESPACE/NAME" in error.message


# Bad inputs across the schema and the manifests: whatever pydantic checks, the user reads words.
BAD = [
    ("replicas: 2", "replicas: -1"),
    ("replicas: 2", "replicas: two"),
    ("replicas: 2", "replicas: 1.5"),
    ("name: t\n", "name: T\n"),
    ("name: t\n", "name: " + "t" * 64 + "\n"),
    ("cluster: {clusterCIDR", "cluster: {kubeVersion: '2.0', clusterCIDR"),
    ("cluster: {clusterCIDR", "cluster: {proxyMode: ebpf, clusterCIDR"),
    ("cluster: {clusterCIDR", "cluster: {brNetfilter: perhaps, clusterCIDR"),
    ("cluster: {clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/16, underlay: 192.168.56.0/24}", "cluster: 5"),
    ("nodes:\n", "nodes: 5\nx:\n"),
    ("labels: {role: web}", "labels: [role]"),
    ("labels: {role: web}", "labels: {role: 'we b'}"),
    ("{name: c, ports", "{name: C, ports"),
    ("containerPort: 8080", "containerPort: http"),
    ("containerPort: 8080", "containerPort: 8080, protocol: SCTP"),
    ("ports: [{name: http, port: 80, targetPort: http}]", "ports: []"),
    ("port: 80, targetPort", "port: 0, targetPort"),
    ("metadata: {name: web}\n    spec:\n      type", "metadata: {name: Web}\n    spec:\n      type"),
    ("metadata: {name: web}\n    spec:\n      type", "metadata: {name: web, namespace: 'a b'}\n    spec:\n      type"),
    ("type: NodePort", "type: ExternalName"),
    ("expect: {outcome: delivered, source: node2}", "expect: 5"),
    ("expect: {outcome: delivered, source: node2}", "expect: {outcome: [refused, refused]}"),
    ("expect: {outcome: delivered, source: node2}", "expect: {outcome: delivered}\n    attempts: many"),
    ("    from: client", "    from: client\n    sourcePort: 70000"),
    ("    from: client", "    from: client\n    keep: yes please"),
    ("name: t\n", "name: t\nmatrix: {proxyMode: iptables}\n"),
    ("    to: {service: web,", "    before: [{scale: Deployment/web, replicas: -3}]\n    to: {service: web,"),
    ("{name: node1, ip: 192.168.56.11", "{name: node1, ip: 192.168.56.311"),
]


@pytest.mark.parametrize(("old", "new"), BAD)
def test_no_error_speaks_pydantic(tmp_path, old, new):
    assert old in BASE, old
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, BASE.replace(old, new, 1)))
    said = str(info.value)
    for word in ("pattern", "regex", "Input should", "String should", "List should", "Value should", "Value error"):
        assert word not in said, said
