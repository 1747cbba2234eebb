"""Names a user gives never meet the lab's own (docs/scenarios.md, "Names"): its namespaces (the fabric, the
stand-ins) and the ports it hangs actors on (to-NAME beside br0, lan0, lo, a fallback tunnel device) are named
as no actor can be (each collision built half a lab: FileExistsError, NetlinkError File exists); a pod named as
a host is its NAMESPACE/NAME; lab import's client, a load balancer's name, the report's underlay keep apart from
a node's; a word of the lab's an expectation uses (gateway, entry) is refused where an actor bears it too."""

from __future__ import annotations

import pytest
from support.host import REPO
from support.scenario import BASE, NODES, error_for, write

from lab.api.cluster import addresses
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.scenario import Options, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.describe.load import load_scenario
from lab.describe.names import DNS1123_LABEL, DNS1123_SUBDOMAIN, refusal
from lab.realize.build import FABRIC, LAN_BRIDGE
from lab.realize.kernel_names import bridge_port, netns_part
from lab.realize.standins import STAND_INS
from lab.report.drawing import topology_dot

NODEPORT = REPO / "tests" / "fixtures" / "kubectl" / "nodeport-source-ip"
# Devices a namespace holding a bridge of the lab's has beside its ports: its own, and the fallback tunnel devices
# the kernel makes in every new namespace while their module is loaded (ipip, sit, ip_gre, ip6_tunnel, ip6_gre).
DEVICES = ("lo", "br0", LAN_BRIDGE, "eth0", "tunl0", "sit0", "gre0", "gretap0", "erspan0", "ip6tnl0", "ip6gre0")


@pytest.mark.parametrize("own", [FABRIC, STAND_INS])
def test_the_labs_own_namespaces_are_named_as_no_actor_can_be(own):
    """A node, an external host or a load balancer (DNS-1123 labels) or a pod (a DNS-1123 subdomain, or
    NAMESPACE_NAME outside default) named as one of the lab's own would share its namespace."""
    assert refusal(DNS1123_LABEL, "a node's name", own) is not None
    assert refusal(DNS1123_SUBDOMAIN, "a pod's name", own) is not None
    assert not netns_part(own).split("_")[0]  # nothing before the mark: no pod's namespace


@pytest.mark.parametrize("device", DEVICES)
def test_an_actor_named_as_a_device_gets_a_port_of_its_own(device):
    """A node named br0 (or lo) on the underlay, a host named lan0 (or eth0) behind a router."""
    assert bridge_port(device) not in DEVICES
    assert bridge_port(device) == f"to-{device}"


# The nodes node1 and node2 and the external host client, a pod named as each of node1 and client.
HOSTS_AND_PODS_OF_ONE_NAME = (
    "name: t\n"
    + NODES
    + """\
workload:
  - {kind: Pod, metadata: {name: client}, spec: {nodeName: node2, containers: [{name: c}]}}
  - kind: Pod
    metadata: {name: node1, labels: {app: web}}
    spec: {nodeName: node1, containers: [{name: c, ports: [{containerPort: 80}]}]}
  - {kind: Service, metadata: {name: web}, spec: {selector: {app: web}, ports: [{port: 80}]}}
probes:
  - {name: from-the-node, from: node1, to: {service: web, port: 80}, expect: {outcome: delivered}}
  - name: from-the-pod
    from: default/client
    to: {service: web, port: 80}
    expect: {outcome: delivered, backend: default/node1}
  - {name: from-the-host, from: client, to: {service: web, port: 80}, expect: {outcome: delivered}}
"""
)


def test_a_pod_named_as_a_node_or_an_external_host_is_its_namespace_and_name(tmp_path):
    """Kubernetes keeps a Pod's name and a Node's apart: the lab calls such a pod NAMESPACE/NAME (its namespace,
    its actor, its reports), and a bare name stays the host's. Before, both shared one namespace."""
    topo = load_scenario(write(tmp_path, HOSTS_AND_PODS_OF_ONE_NAME)).variants[0]
    assert [p.name for p in topo.pods] == ["default/client", "default/node1"]
    assert [p.source for p in topo.probes] == ["node1", "default/client", "client"]
    assert topo.probes[1].expected.backends == ("default/node1",)
    actors = [*(n.name for n in topo.nodes), *(e.name for e in topo.externals), *(p.name for p in topo.pods)]
    assert len({netns_part(a) for a in actors}) == len(actors) == 5


def test_an_imported_node_named_as_the_imports_client_leaves_the_client_another_name(tmp_path):
    """lab import's external host is `client`; a cluster's node of that name made a scenario lab validate refused
    ("name 'client' is already used")."""
    dump = (NODEPORT / "dump.yaml").read_text().replace("node3", "client")
    (tmp_path / "dump.yaml").write_text(dump)
    files = [str(tmp_path / "dump.yaml"), *(str(NODEPORT / f) for f in ("kube-proxy.yaml", "version.yaml"))]
    scenario = import_cluster(read_inputs(files), Options()).scenario
    assert [h["name"] for h in scenario["externalHosts"]] == ["client-2"]
    topo = load_scenario(write(tmp_path, scenario_text(scenario))).variants[0]
    assert "client" in {n.name for n in topo.nodes} and "client-2" in {p.source for p in topo.probes}


def test_a_load_balancer_named_as_a_node_leaves_the_node_its_address(tmp_path):
    """A load balancer's name is the lab's own and may be a node's; lab.api's actor of that name is the node, at
    the node's address (it was the load balancer's)."""
    text = HOSTS_AND_PODS_OF_ONE_NAME.replace(
        "workload:", "loadBalancers: [{name: node1, address: 192.168.56.2}]\nworkload:"
    )
    text = text.replace(
        "ports: [{port: 80}]}}",
        "ports: [{port: 80}], type: LoadBalancer}, status: {loadBalancer: {ingress: [{ip: 203.0.113.7}]}}}",
    )
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert [lb.name for lb in topo.load_balancers] == ["node1"]
    assert addresses(topo)["node1"] == "192.168.56.11"


def test_a_pod_named_as_a_stand_in_node_is_its_namespace_and_name(tmp_path):
    """A stand-in node has no namespace, yet its name is a host's: a pod of that name is probed from as
    NAMESPACE/NAME (it was taken for the stand-in, where no probe starts)."""
    sliced = (REPO / "tests" / "integration" / "topologies" / "stand-ins.yaml").read_text()
    text = sliced.replace("{name: client}", "{name: node2}")
    text = text.replace("from: client", "from: default/node2").replace("source: client", "source: default/node2")
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert [p.name for p in topo.pods] == ["default/node2"]
    assert {p.source for p in topo.probes} == {"default/node2"}


def pod_on_node2(name: str) -> tuple[str, str]:
    """A pod of that name on node2, added to BASE's workload (its Service selects none of it)."""
    return "workload:\n", f"workload:\n  - {{kind: Pod, metadata: {{name: {name}}}, spec: {{nodeName: node2}}}}\n"


@pytest.mark.parametrize(
    ("changes", "field", "said"),
    [
        (  # the underlay's gateway, and a pod named so
            [pod_on_node2("gateway"), ("source: node2}", "source: gateway}")],
            "probes[0].expect.source",
            "'gateway' names more than one address (192.168.56.1, 10.244.2.2): write the one meant",
        ),
        (  # the node the connection entered through, and a pod named so
            [pod_on_node2("entry"), ("source: node2}", "source: entry}")],
            "probes[0].expect.source",
            "'entry' is the node the connection entered through, and also a pod: write default/entry for the pod",
        ),
        (
            [
                ("{name: client,", "{name: entry,"),
                ("from: client", "from: entry"),
                ("source: node2}", "source: entry}"),
            ],
            "probes[0].expect.source",
            "'entry' is the node the connection entered through, and also the external host entry: write the"
            " external host's address",
        ),
        (
            [("{name: node2,", "{name: entry,"), ("node: node2}", "node: entry}"), ("source: node2}", "node: entry}")],
            "probes[0].expect.node",
            "'entry' is the node the connection entered through, and also the node entry: the lab cannot tell",
        ),
    ],
)
def test_a_word_of_the_labs_a_scenario_also_names_something_is_refused_where_used(tmp_path, changes, field, said):
    """The lab's words in an expectation are names a user may give too: `source: gateway` took the pod's
    address, `entry` the entry node whatever actor had that name."""
    text = BASE
    for old, new in changes:
        assert old in text
        text = text.replace(old, new)
    error = error_for(tmp_path, text)
    assert error.field == field and error.message.startswith(said), str(error)


def test_a_host_named_underlay_is_drawn_apart_from_the_underlay(tmp_path):
    """The HTML report's picture: the underlay and a host named underlay were one node of the graph."""
    text = BASE.replace("{name: client,", "{name: underlay,").replace("from: client", "from: underlay")
    (topo,) = load_scenario(write(tmp_path, text)).variants
    dot = topology_dot(topo)
    declared = [line.split(" [label=")[0].strip() for line in dot.splitlines() if " [label=" in line]
    assert len(declared) == len(set(declared)) == 6  # the underlay, two nodes, two pods, the host
    assert '"a:underlay" [label="underlay (host)' in dot
