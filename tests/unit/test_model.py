"""The scenario model: resolution and the error messages a user sees for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario


def test_resolves_addresses_ports_and_endpoints(tmp_path):
    topo = load_scenario(write(tmp_path, BASE)).variants[0]
    assert [(p.name, p.node, p.ip) for p in topo.pods] == [
        ("web-0", "node1", "10.244.1.2"),
        ("web-1", "node1", "10.244.1.3"),
    ]
    svc = topo.services[0]
    assert svc.cluster_ip == "10.96.0.10"
    assert svc.ports[0].node_port == 30000
    assert [(e.ip, e.port) for e in svc.ports[0].endpoints] == [("10.244.1.2", 8080), ("10.244.1.3", 8080)]
    probe = topo.probes[0]
    assert (probe.dst_ip, probe.dst_port, probe.expected.source_ip) == ("192.168.56.12", 30000, "192.168.56.12")


def test_matrix_expands_variants_and_picks_expectations(tmp_path):
    text = BASE.replace(
        "    expect: {outcome: delivered, source: node2}\n",
        "    expect:\n"
        "      - {when: {externalTrafficPolicy: Local}, outcome: dropped}\n"
        "      - {outcome: delivered, source: node2}\n",
    )
    text += "matrix:\n  externalTrafficPolicy: [Cluster, Local]\n"
    variants = load_scenario(write(tmp_path, text)).variants
    assert [v.services[0].external_policy for v in variants] == ["Cluster", "Local"]
    assert [v.probes[0].expected.outcome for v in variants] == ["delivered", "dropped"]


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "message"),
    [
        (
            "nodeSelector: {role: web}",
            "nodeName: node9",
            17,
            "workload[0].spec.template.spec.nodeName",
            "unknown node 'node9'; expected one of node1, node2",
        ),
        (
            "podCIDR: 10.244.2.0/24}",
            "podCIDR: 10.244.1.128/25}",
            5,
            "nodes[1].podCIDR",
            "overlaps node1's 10.244.1.0/24",
        ),
        ("ip: 192.168.56.100}", "ip: 192.168.57.100}", 7, "externalHosts[0].ip", "outside the underlay"),
        ("kind: Service", "kind: Ingress", 19, "workload[1]", "unsupported kind 'Ingress'"),
        ("port: http, via", "port: https, via", 28, "probes[0].to.port", "has no port 'https'"),
        ("from: client", "from: somebody", 27, "probes[0].from", "unknown pod, node or external host"),
        ("expect: {outcome: delivered", "expect: {outcome: maybe", 29, "probes[0].expect.outcome", "'delivered'"),
        (
            "targetPort: http",
            "targetPort: web",
            24,
            "workload[1].spec.ports[0].targetPort",
            "no selected pod has a container port named 'web'",
        ),
        ("name: t\n", "name: t\nbogus: 1\n", 2, "bogus", "unknown field"),
        (
            "type: NodePort",
            "type: NodePort\n      externalIPs: ['2001:db8::1']",
            23,
            "workload[1].spec.externalIPs[0]",
            "expected an IPv4 address (the cluster is IPv4 only), got '2001:db8::1'",
        ),
        (
            "type: NodePort",
            "type: NodePort\n      loadBalancerSourceRanges: [10.0.0.0/33]",
            23,
            "workload[1].spec.loadBalancerSourceRanges[0]",
            "expected a CIDR such as 203.0.113.0/24 or 2001:db8::/64",
        ),
        (
            "type: NodePort",
            'type: NodePort\n      loadBalancerSourceRanges: ["fd00::/129"]',
            23,
            "workload[1].spec.loadBalancerSourceRanges[0]",
            "got 'fd00::/129'",
        ),
    ],
)
def test_errors_name_file_line_field_and_expectation(tmp_path, old, new, line, field, message):
    assert old in BASE
    error = error_for(tmp_path, BASE.replace(old, new, 1))
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message
    assert str(error).startswith(f"{tmp_path / 's.yaml'}:{line}: {field}: ")


def test_cidr_overlap_between_cluster_networks(tmp_path):
    error = error_for(tmp_path, BASE.replace("serviceCIDR: 10.96.0.0/16", "serviceCIDR: 10.244.128.0/20"))
    assert error.field == "cluster.serviceCIDR" and "overlaps clusterCIDR" in error.message


def test_unquoted_version_is_refused(tmp_path):
    error = error_for(tmp_path, BASE.replace("cluster: {", "cluster: {kubeVersion: 1.30, "))
    assert error.field == "cluster.kubeVersion" and 'in quotes ("1.30", not 1.30)' in error.message


def test_unsupported_version_lists_the_supported_ones(tmp_path):
    error = error_for(tmp_path, BASE.replace("cluster: {", 'cluster: {kubeVersion: "1.12", '))
    assert error.field == "cluster.kubeVersion" and "supported: " in error.message and "1.31" in error.message


def test_newer_version_names_the_newest(tmp_path):
    error = error_for(tmp_path, BASE.replace("cluster: {", 'cluster: {kubeVersion: "1.39", '))
    assert error.field == "cluster.kubeVersion"
    assert error.message == "kube-proxy 1.39 is newer than the lab knows: the newest reproduced is 1.38"


def test_invalid_yaml_names_the_line(tmp_path):
    error = error_for(tmp_path, BASE + "  - [unclosed\n")
    assert error.line is not None and "not valid YAML" in error.message


def test_every_shipped_scenario_loads():
    for path in sorted(Path(__file__).resolve().parents[2].joinpath("topologies").glob("*.yaml")):
        assert load_scenario(path).variants


STEPS = (
    BASE
    + """\
  - name: after
    from: client
    to: {service: web, port: http, via: nodePort, node: node2}
    before:
      - {when: {externalTrafficPolicy: Local}, run: "ip addr del 10.0.0.1/32 dev 'kube ipvs0'", nodes: [node2]}
      - {run: conntrack -F}
      - {delete: Service/web}
    expect: {outcome: refused}
matrix:
  externalTrafficPolicy: [Cluster, Local]
"""
)


def test_steps_resolve_per_variant(tmp_path):
    cluster, local = load_scenario(write(tmp_path, STEPS)).variants
    assert [str(s) for s in cluster.probes[1].before] == [
        "on node1, node2: conntrack -F",
        "delete Service default/web (kube-proxy resyncs every node)",
    ]
    step = local.probes[1].before[0]
    assert (step.argv, step.nodes) == (("ip", "addr", "del", "10.0.0.1/32", "dev", "kube ipvs0"), ("node2",))
    assert not cluster.probes[0].before


def test_a_scale_up_creates_new_replicas_that_join_the_endpoints(tmp_path):
    steps = "{scale: Deployment/web, replicas: 1}\n      - {scale: Deployment/web, replicas: 3}"
    (topo,) = load_scenario(write(tmp_path, STEPS.replace("{delete: Service/web}", steps)), {}).variants[:1]
    # Declared 2; down to 1 (web-1 goes), up to 3: two new pods, web-2 and web-3, built at the start and idle.
    assert [p.name for p in topo.pods] == ["web-0", "web-1"]
    assert [p.name for p in topo.pending_pods] == ["web-2", "web-3"]
    assert all(ep.pod in ("web-0", "web-1") for port in topo.services[0].ports for ep in port.endpoints)
    down, up = topo.probes[1].before[-2:]
    assert str(up) == "scale Deployment web to 3: create pod web-2, web-3 (kube-proxy resyncs every node)"
    assert [p.name for p in up.pods or ()] == ["web-0", "web-2", "web-3"]
    assert [ep.pod for ep in (up.services or ())[0].ports[0].endpoints] == ["web-0", "web-2", "web-3"]
    assert "web-1" not in [p.name for p in down.pods or ()]


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("{delete: Service/web}", "{delete: Service/other}", "probes[1].before[2].delete", "no Service default/other"),
        ("{delete: Service/web}", "{delete: Deployment/web}", "probes[1].before[2].delete", "expected Service/NAME or"),
        ("{delete: Service/web}", "{delete: Pod/web}", "probes[1].before[2].delete", "no pod default/web in the"),
        ("{delete: Service/web}", "{scale: Deployment/web}", "probes[1].before[2]", "go together"),
        ("{delete: Service/web}", "{set: Pod/web-0}", "probes[1].before[2]", "needs `ready: true|false`"),
        ("{delete: Service/web}", "{scale: Deployment/web, replicas: 300}", "workload[0]", "no address is left"),
        ("{delete: Service/web}", "{restart: kubelet}", "probes[1].before[2].restart", "'kube-proxy'"),
        ("nodes: [node2]}", "nodes: [node7]}", "probes[1].before[0].nodes[0]", "unknown node 'node7'"),
        ("{run: conntrack -F}", "{run: ''}", "probes[1].before[1].run", "expected a command"),
        ("{run: conntrack -F}", "{run: conntrack -F, delete: Service/web}", "probes[1].before[1]", "one of `run"),
        ("{delete: Service/web}", "{delete: Service/web, nodes: [node1]}", "probes[1].before[2]", "`nodes` goes with"),
        ("{when: {externalTrafficPolicy: Local}", "{when: {mode: x}", "probes[1].before[0].when.mode", "not a matrix"),
    ],
)
def test_step_errors_name_the_field(tmp_path, old, new, field, message):
    assert old in STEPS
    error = error_for(tmp_path, STEPS.replace(old, new, 1))
    assert error.field == field, str(error)
    assert message in error.message
