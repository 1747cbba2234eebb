"""`lab import` on kubectl's own output (tests/fixtures/kubectl: `kubectl get nodes,pods,services,endpointslices -A
-o yaml|json`, kube-proxy's ConfigMap, `kubectl version -o yaml`): the scenario it writes passes validation and
holds the cluster's endpoints as kube-proxy read them; what the lab cannot build is said, never dropped silently;
a broken input names file, line, object and field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lab.describe.errors import ScenarioError
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.probes import probes_for
from lab.describe.kubectl.scenario import Imported, Options, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.describe.load import load_scenario

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "kubectl"
NODEPORT = [str(FIXTURES / "nodeport-source-ip" / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]
SHOP = [str(FIXTURES / "shop" / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]


def imported(files: list[str], **options) -> Imported:
    return import_cluster(read_inputs(files), Options(**options))


def loaded(tmp_path: Path, result: Imported):
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(result.scenario))
    return load_scenario(path).variants[0]


def lab(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lab", *args], input=stdin, capture_output=True, text=True, cwd=REPO, check=False
    )


def notes_about(result: Imported, *words: str) -> list[str]:
    return [n for n in result.notes if all(w in n for w in words)]


def test_the_nodeport_source_ip_cluster_becomes_its_scenario(tmp_path):
    result = imported(NODEPORT)
    topo = loaded(tmp_path, result)
    assert (topo.cluster.proxy_mode, topo.cluster.kube_version, topo.cluster.cluster_cidr) == (
        "iptables",
        "1.31",
        "10.244.0.0/16",
    )
    assert [(n.name, n.ip, n.pod_cidr) for n in topo.nodes] == [
        ("node1", "192.168.56.11", "10.244.1.0/24"),
        ("node2", "192.168.56.12", "10.244.2.0/24"),
        ("node3", "192.168.56.13", "10.244.3.0/24"),
    ]
    web = next(s for s in topo.services if s.name == "openresty")
    assert (web.cluster_ip, web.ports[0].node_port) == ("10.96.148.27", 30080)
    assert [(e.pod, e.node, e.ip, e.port, e.ready) for e in web.ports[0].endpoints] == [
        ("openresty", "node1", "10.244.1.2", 8080, True)
    ]
    # The apiserver's endpoint is a host-network address no pod of the lab answers at: said, and skipped.
    assert notes_about(result, "EndpointSlice default/kubernetes", "192.168.56.11", "left out")
    assert notes_about(result, "Service default/kubernetes", "skipped")
    assert notes_about(result, "kindnet", "cni: bridge")
    probes = {p.name: p for p in topo.probes}
    through = probes["default-openresty-http-node-port-via-node2"]
    assert (through.source, through.dst_ip, through.dst_port) == ("client", "192.168.56.12", 30080)
    assert through.expected.observe


def test_every_probe_only_observes_and_covers_each_frontend_and_kind_of_node(tmp_path):
    """openresty's endpoint is on node1; node2 and node3 hold none, so one of them stands for both."""
    scenario = imported(NODEPORT).scenario
    names = [p["name"] for p in scenario["probes"] if p["to"]["service"] == "openresty"]
    assert names == [f"default-openresty-http-cluster-ip-from-node{i}" for i in (1, 2)] + [
        f"default-openresty-http-node-port-via-node{i}" for i in (1, 2)
    ]
    assert {p["expect"] for p in scenario["probes"]} == {"observe"}


def test_yaml_and_json_dumps_import_alike():
    as_json = [SHOP[0].replace("dump.yaml", "dump.json"), *SHOP[1:]]
    assert imported(as_json).scenario == imported(SHOP).scenario


def test_endpoints_keep_their_conditions_zones_and_hints(tmp_path):
    topo = loaded(tmp_path, imported(SHOP))
    web = next(s for s in topo.services if s.name == "web")
    endpoints = {e.ip: e for e in web.ports[0].endpoints}
    assert sorted(endpoints) == ["100.64.1.10", "100.64.2.11", "100.64.3.12"]
    terminating = endpoints["100.64.3.12"]
    assert (terminating.ready, terminating.serving, terminating.terminating) == (False, True, True)
    assert endpoints["100.64.1.10"].hints.zones == ("eu-west-1a",)
    api = next(s for s in topo.services if s.name == "api")
    assert [(p.name, p.protocol) for p in api.ports] == [("grpc", "TCP"), ("stats", "UDP")]
    assert {e.ip: e.ready for e in api.ports[0].endpoints} == {"100.64.1.20": True, "100.64.2.21": False}


def test_kube_proxy_configuration_and_frontends(tmp_path):
    result = imported(SHOP)
    topo = loaded(tmp_path, result)
    cluster = topo.cluster
    assert (cluster.proxy_mode, cluster.kube_version, cluster.cni) == ("ipvs", "1.30", "routed-tunnel")
    assert result.scenario["cluster"]["ipvs"] == {"scheduler": "lc", "strictARP": True}
    assert result.scenario["cluster"]["conntrack"] == {"tcpBeLiberal": True, "udpTimeout": 30}
    # The IPv6 CIDR is kept: the imported IPv4 cluster's proxier ignores it, as kube-proxy's does.
    assert result.scenario["cluster"]["nodePortAddresses"] == ["10.0.0.0/16", "2a05:d018::/32"]
    web = next(s for s in topo.services if s.name == "web")
    assert (web.ingress_ips, web.proxy_ingress_ips, web.external_policy) == (("198.51.100.7",),) * 2 + ("Local",)
    # kube-proxy writes nothing for an ipMode Proxy address: the lab's load balancer takes it to the NodePort.
    assert result.scenario["loadBalancers"] == [{"name": "lb", "services": ["shop/web"]}]
    spoofed = next(p for p in topo.probes if p.name == "shop-web-http-load-balancer-from-source-range")
    assert spoofed.source_address == "203.0.113.1"


@pytest.mark.parametrize(
    "words",
    [
        ("Service payments/db", "headless"),
        ("Service shop/search", "ExternalName"),
        ("Service monitoring/node-exporter", "service-proxy-name"),
        ("Service monitoring/grafana:", "no cluster IP of the imported families (IPv4)"),
        ("Service shop/web", "fd00:20::e07", "not of the imported cluster's families (IPv4)"),
        ("Service shop/web", "elb.amazonaws.com"),
        ("Service shop/web", "loadBalancerSourceRanges", "2001:db8::/32", "not of the imported cluster's families"),
        ("Service payments/api", "ports[2].protocol", "SCTP"),
        ("EndpointSlice shop/web-r9fmd", "IPv6", "skipped"),
        ("Pod monitoring/grafana-7f9d8c6b5-m4x2p", "100.77.0.5", "outside"),
        ("Node ip-10-0-1-15.eu-west-1.compute.internal", "2a05:d018:1:1::f"),
        ("Node ip-10-0-1-15.eu-west-1.compute.internal", "named ip-10-0-1-15-eu-west-1-compute-internal"),
        ("ConfigMap kube-system/kube-proxy-config: data.config: detectLocalMode", "NodeCIDR"),
        ("data.config: featureGates.TopologyAwareHints", "true"),
        ("data.config: conntrack.tcpEstablishedTimeout", "not modelled"),
        ("data.config: clusterCIDR", "fd00:64::/48", "the cluster is imported IPv4"),
        ("Calico", "routed-tunnel"),
        ("Service shop/web: metadata.annotations.service.beta.kubernetes.io/aws-load-balancer-type", "not modelled"),
        ("Service shop/web: status.loadBalancer", "ipMode Proxy", "proxies to the NodePort"),
    ],
)
def test_what_the_lab_leaves_out_is_said_with_file_line_and_object(words):
    found = notes_about(imported(SHOP), *words)
    assert found, f"no note with {words}"
    assert found[0].startswith(str(FIXTURES / "shop"))


def test_asked_services_bring_only_their_nodes_and_pods(tmp_path):
    result = imported(SHOP, services=["payments/api"])
    topo = loaded(tmp_path, result)
    assert [s.name for s in topo.services] == ["api"]
    # api's endpoints run on the first two nodes; one more node shows the path through a node without one.
    assert len(topo.nodes) == 3
    pods = {p.name for p in topo.built_pods}
    assert pods == {"api-5b9f7c8d4-kx8wq", "api-5b9f7c8d4-z2lmn", "web-6d4cf56db6-qq7tz"}


def test_anonymize_renames_and_moves_everything_consistently(tmp_path):
    result = imported(SHOP, anonymize=True)
    text = scenario_text(result.scenario)
    for secret in ("eu-west-1", "payments", "shop", "web-6d4", "10.0.1.15", "100.64.", "172.20.", "198.51.100.7"):
        assert secret not in text
    topo = loaded(tmp_path, result)
    web = next(s for s in topo.services if s.ingress_ips)
    assert web.ports[0].node_port == 30443
    by_node = {n.name: n for n in topo.nodes}
    for e in web.ports[0].endpoints:
        node = by_node[e.node]
        assert e.ip.rsplit(".", 1)[0] == node.pod_cidr.rsplit(".", 1)[0]  # still inside its node's podCIDR
    zones = {dict(n.labels).get("topology.kubernetes.io/zone") for n in topo.nodes}
    assert zones == {"zone-1", "zone-2"}
    assert {h for e in web.ports[0].endpoints for h in e.hints.zones} <= zones


def test_standard_input_and_the_cli(tmp_path):
    dump = Path(NODEPORT[0]).read_text()
    done = lab("import", "-", NODEPORT[1], "--kube-version", "1.29", "-o", str(tmp_path / "s.yaml"), stdin=dump)
    assert done.returncode == 0, done.stderr
    assert "note: <stdin>:" in done.stderr
    written = yaml.safe_load((tmp_path / "s.yaml").read_text())
    assert written["cluster"]["kubeVersion"] == "1.29"
    assert lab("validate", str(tmp_path / "s.yaml")).returncode == 0


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            ("    podCIDRs:\n    - 10.244.2.0/24", "    podCIDRs: 10.244.2.0/24"),
            "dump.yaml:{line}: Node node2: spec.podCIDRs: expected a list, got '10.244.2.0/24'",
        ),
        (
            ("      nodePort: 30080", "      nodePort: high"),
            "Service default/openresty: spec.ports[0].nodePort: expected",
        ),
        (
            ("kind: List", "kind: Lisst"),
            "no Node in the input (give kubectl get nodes,... -o yaml); dump.yaml: 1 Lisst object(s) not read",
        ),
    ],
)
def test_a_broken_dump_names_file_line_object_and_field(tmp_path, edit, said):
    text = Path(NODEPORT[0]).read_text()
    assert edit[0] in text
    broken = tmp_path / "dump.yaml"
    broken.write_text(text.replace(edit[0], edit[1], 1))
    line = text[: text.index(edit[0])].count("\n") + 1
    done = lab("import", str(broken), *NODEPORT[1:])
    out = done.stderr.replace(str(tmp_path) + "/", "")
    assert said.format(line=line) in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--service", "default/nothing"], "--service: no Service default/nothing in the input"),
        (["--service", "nothing"], "expected NAMESPACE/NAME"),
        (["--kube-version", "1.12"], "kube-proxy 1.12 is not reproduced"),
        (["--name", "Not_A_Label"], "--name"),
    ],
)
def test_a_bad_flag_is_named(args, said):
    done = lab("import", *NODEPORT, *args)
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr


def test_a_file_that_is_no_kubectl_output_is_refused(tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text("name: x\nnodes: []\n")
    done = lab("import", str(other))
    assert done.returncode == 2
    assert f"{other}:1: not kubectl output (a Kubernetes object or List" in done.stderr


def test_the_same_object_twice_is_refused():
    with pytest.raises(ScenarioError, match="given twice"):
        imported([NODEPORT[0], NODEPORT[0], NODEPORT[2]])


def test_without_a_version_the_nodes_kube_proxy_version_is_taken():
    assert imported(SHOP[:2]).scenario["cluster"]["kubeVersion"] == "1.30"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("kind: List\nitems: !!python/object:os.system x\n", ":2: items: the tag !!python/object:os.system is not"),
        ("kind: List\nkind: List\n", ":2: kind: duplicate key 'kind' (first at line 1)"),
        ("kind: List\nitems: &a [*a]\n", ":2: alias *a is inside the value it names"),
        ("kind: List\nitems: [\n", ":3: not valid YAML"),
        ("kind: List\nitems: " + "[" * 70 + "]" * 70 + "\n", ":2: nested deeper than 64 levels"),
    ],
)
def test_a_dump_is_plain_yaml_read_with_bounds(tmp_path, text, said):
    """Dumps are parsed with libyaml for speed, with the same refusals as a scenario file."""
    path = tmp_path / "dump.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        read_inputs([str(path)])
    assert said in str(info.value)


def test_a_bare_kube_proxy_configuration_and_what_its_release_takes(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n"
        "nodePortAddresses: [all, localhost]\niptables: {masqueradeAll: true, localhostNodePorts: false}\n"
        "featureGates: {KubeProxyNFTablesLocalhostNodePorts: true}\n"
    )
    newest = imported([NODEPORT[0], str(conf)], kube_version="1.37")
    cluster = newest.scenario["cluster"]
    assert (cluster["proxyMode"], cluster["nodePortAddresses"], cluster["masqueradeAll"]) == (
        "nftables",
        ["all", "localhost"],
        True,
    )
    assert cluster["iptables"] == {"localhostNodePorts": False}
    assert cluster["featureGates"] == {"KubeProxyNFTablesLocalhostNodePorts": True}
    assert cluster["kubeProxyClusterCIDR"] is False  # no clusterCIDR: kube-proxy detects no local traffic by it
    older = imported([NODEPORT[0], str(conf)], kube_version="1.31")
    cluster = older.scenario["cluster"]
    assert "nodePortAddresses" not in cluster and "featureGates" not in cluster
    assert notes_about(older, "conf.yaml:4: KubeProxyConfiguration: nodePortAddresses", "'all' (added in 1.37")
    assert notes_about(older, "conf.yaml:6: KubeProxyConfiguration: featureGates", "no feature gate")


def test_a_broken_configuration_names_its_line_in_the_configmap(tmp_path):
    broken = tmp_path / "kube-proxy.yaml"
    text = Path(NODEPORT[1]).read_text()
    broken.write_text(text.replace("    mode: iptables", "    mode: userspace"))
    line = text[: text.index("    mode: iptables")].count("\n") + 1
    with pytest.raises(ScenarioError) as info:
        imported([NODEPORT[0], str(broken), NODEPORT[2]])
    assert str(info.value) == (
        f"{broken}:{line}: ConfigMap kube-system/kube-proxy: data.config.conf: mode: expected iptables, ipvs or "
        "nftables (what the lab reproduces), got 'userspace'"
    )


def test_a_dump_without_endpoint_slices_says_so(tmp_path):
    dump = tmp_path / "dump.yaml"
    text = Path(NODEPORT[0]).read_text()
    dump.write_text(text[: text.index("- addressType: IPv4")] + 'kind: List\nmetadata:\n  resourceVersion: ""\n')
    result = imported([str(dump), *NODEPORT[1:]])
    assert notes_about(result, "Service default/openresty", "no EndpointSlice of it in the input")
    assert not [m for m in result.scenario["workload"] if m["kind"] == "EndpointSlice"]


def test_a_dual_stack_services_source_ranges_give_a_spoofed_probe_per_family():
    """Each family's proxier filters on its own family's loadBalancerSourceRanges: the spoofed probe from inside
    a range goes once per family that has one, from an address of that range."""
    service = {
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ipFamilies": ["IPv4", "IPv6"], "ports": [{"name": "http", "port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}, {"ip": "fd00:203::10"}]}},
    }
    ranges = [" 2001:db8::/64", "198.51.100.0/24"]
    spoofed = [p for p in probes_for(service, "default", {}, [], "outside", ranges) if "sourceAddress" in p]
    assert [(p["name"], p.get("family"), p["sourceAddress"]) for p in spoofed] == [
        ("default-web-http-load-balancer-from-source-range", None, "198.51.100.1"),
        ("default-web-http-load-balancer-from-source-range-ipv6", "IPv6", "2001:db8::1"),
    ]
    v6_only = probes_for(service, "default", {}, [], "outside", ["2001:db8::/64"])
    assert [p["name"] for p in v6_only if "sourceAddress" in p] == [
        "default-web-http-load-balancer-from-source-range-ipv6"
    ]
