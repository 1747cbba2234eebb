"""Stand-in nodes of a sliced cluster (docs/scenarios.md, "Stand-in nodes"): their endpoints are the addresses of
their podCIDRs, they are no built node, and every probe that would need one to act as a node is refused in words."""

from __future__ import annotations

import pytest
from support.host import REPO
from support.scenario import error_for, write

from lab.describe.load import load_scenario
from lab.describe.resolve.workload import StandInBlocks
from lab.describe.topology import NodeSpec
from lab.probe.session import listeners
from lab.realize.build import Realized
from lab.realize.standins import STAND_INS

SLICED = (REPO / "tests" / "integration" / "topologies" / "stand-ins.yaml").read_text()


def test_stand_in_endpoints_are_their_addresses_on_their_nodes(tmp_path):
    topo = load_scenario(write(tmp_path, SLICED)).variants[0]
    assert [n.name for n in topo.nodes] == ["node1"]
    assert [(n.name, n.ip, n.pod_cidr) for n in topo.stand_ins] == [
        ("node2", "192.168.56.12", "10.244.2.0/24"),
        ("node3", "192.168.56.13", "10.244.3.0/24"),
    ]
    (port,) = topo.services[0].ports
    assert [(ep.pod, ep.node, ep.ip, ep.port) for ep in port.endpoints] == [
        ("10.244.2.7", "node2", "10.244.2.7", 8080),
        ("10.244.3.9", "node3", "10.244.3.9", 8080),
        ("10.244.2.8", "node1", "10.244.2.8", 8080),  # the slice's nodeName, kube-proxy's to read
    ]


def test_a_block_is_found_by_each_prefix_length():
    nodes = [NodeSpec("a", "192.168.56.2", "10.244.2.0/24", ""), NodeSpec("b", "192.168.56.3", "10.245.0.0/16", "")]
    blocks = StandInBlocks(nodes)
    assert [blocks.node_of(ip) for ip in ("10.244.2.255", "10.245.7.1", "10.244.3.1")] == ["a", "b", None]


def test_built_nodes_alone_count_against_the_bound(tmp_path):
    many = "".join(
        f"  - {{name: s{i}, ip: 192.168.57.{i}, podCIDR: 10.244.{100 + i}.0/24, standIn: true}}\n"
        for i in range(1, 120)
    )
    text = SLICED.replace("  underlay: 192.168.56.0/24", "  underlay: 192.168.56.0/23").replace(
        "workload:\n", many + "workload:\n", 1
    )
    assert len(load_scenario(write(tmp_path, text)).variants[0].stand_ins) == 121


CLIENT_PROBE = "  - name: cluster-ip-to-stand-in\n    from: client\n    to: {service: web, port: 80}\n"


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        (  # a source on a stand-in
            CLIENT_PROBE,
            CLIENT_PROBE.replace("from: client", "from: node2"),
            "probes[0].from",
            "node2 is a stand-in node (standIn: true): the lab builds no node there, so no probe starts there",
        ),
        (  # entering at a stand-in's NodePort
            "via: nodePort, node: node1}",
            "via: nodePort, node: node3}",
            "probes[1].to.node",
            "node3 is a stand-in node (standIn: true): the lab builds no node there, so nothing enters it",
        ),
        (  # a stand-in's node IP as a destination
            "to: {service: web, port: 80}\n",
            "to: {address: 192.168.56.12, port: 8080}\n",
            "probes[0].to.address",
            "node2 is a stand-in node (standIn: true): the lab builds no node there, so its node IP answers nothing",
        ),
        (  # a pod the lab would build on a stand-in
            "spec: {nodeName: node1, containers: [{name: app}]}\n    status: {podIP: 10.244.1.5}",
            "spec: {nodeName: node2, containers: [{name: app}]}\n    status: {podIP: 10.244.2.5}",
            "workload[0].spec.nodeName",
            "node2 is a stand-in node (standIn: true): it runs no pod the lab builds",
        ),
        (  # an endpoint in no stand-in's block, nor any actor's address
            "addresses: [10.244.3.9]",
            "addresses: [10.244.4.9]",
            "workload[2].endpoints[1].addresses[0]",
            "10.244.4.9 is no pod's or external host's address, nor in a stand-in node's podCIDR",
        ),
        (  # a tunnelling CNI: pod blocks are not routed to node IPs
            "  underlay: 192.168.56.0/24\n",
            "  underlay: 192.168.56.0/24\n  cni: routed-tunnel\n",
            "nodes[1].standIn",
            "stand-in nodes are modelled with cni: bridge (pod blocks routed), not routed-tunnel",
        ),
        (  # a link it does not have
            "podCIDR: 10.244.2.0/24, standIn: true}",
            "podCIDR: 10.244.2.0/24, standIn: true, mtu: 9000}",
            "nodes[1].mtu",
            "a stand-in node has no link of its own",
        ),
        (
            "podCIDR: 10.244.2.0/24, standIn: true}",
            "podCIDR: 10.244.2.0/24, standIn: maybe}",
            "nodes[1].standIn",
            "expected true or false, not 'maybe'",
        ),
    ],
)
def test_what_needs_a_stand_in_to_be_a_node_is_refused(tmp_path, old, new, field, message):
    assert old in SLICED
    error = error_for(tmp_path, SLICED.replace(old, new, 1))
    assert error.field == field and message in error.message, str(error)


STAND_IN_ENDPOINT = "      - addresses: [10.244.2.7]\n"


def _listened(tmp_path, text):
    """Where the probe session's backends listen for the scenario: (namespace, port, who answers) of each, with the
    stand-in namespace's answers by address."""
    topo = load_scenario(write(tmp_path, text)).variants[0]
    namespaces = {"node1": "lab-node1", "client": "lab-client", STAND_INS: "lab-stand-ins"}
    found = []
    for listener in listeners(Realized("lab", topo, namespaces, 0.0, {})):
        answers = dict(listener.owners) or {listener.backend: (listener.backend, listener.node)}
        found += [(listener.netns, listener.port, address, *who) for address, who in sorted(answers.items())]
    return found


def test_a_stand_in_pod_naming_another_node_is_answered_from_the_stand_in_namespace(tmp_path):
    """An EndpointSlice may give any nodeName (kube-proxy reads it only to tell local endpoints): an address in
    node2's podCIDR named node1's is still node2's pod, answered where the stand-ins are."""
    assert STAND_IN_ENDPOINT in SLICED
    named = SLICED.replace(STAND_IN_ENDPOINT, STAND_IN_ENDPOINT + "        nodeName: node1\n", 1)
    assert _listened(tmp_path, named) == [
        ("lab-stand-ins", 8080, "10.244.2.7", "10.244.2.7", "node2"),
        ("lab-stand-ins", 8080, "10.244.2.8", "10.244.2.8", "node2"),
        ("lab-stand-ins", 8080, "10.244.3.9", "10.244.3.9", "node3"),
    ]


def test_a_built_pod_whose_endpoint_names_a_stand_in_is_answered_by_the_pod(tmp_path):
    """The client pod's address as an endpoint named node2's: the pod answers on its own node, as in the cluster."""
    assert STAND_IN_ENDPOINT in SLICED
    named = SLICED.replace(STAND_IN_ENDPOINT, "      - addresses: [10.244.1.5]\n        nodeName: node2\n", 1)
    assert _listened(tmp_path, named) == [
        ("lab-client", 8080, "client", "client", "node1"),
        ("lab-stand-ins", 8080, "10.244.2.8", "10.244.2.8", "node2"),
        ("lab-stand-ins", 8080, "10.244.3.9", "10.244.3.9", "node3"),
    ]


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("{name: node2, ip: 192.168.56.101}", "name 'node2' is already used at line 21"),
        ("{name: db, ip: 192.168.56.13}", "address '192.168.56.13' is already used at line 22"),
    ],
)
def test_an_external_host_with_a_stand_ins_name_or_node_ip_is_refused(tmp_path, host, message):
    """A stand-in's node IP is on the underlay (the stand-in namespace holds it), and its name is a node's."""
    error = error_for(tmp_path, SLICED.replace("externalHosts:\n", f"externalHosts:\n  - {host}\n", 1))
    assert error.field.startswith("externalHosts[0]") and message in error.message, str(error)


def test_a_name_shared_with_a_built_node_after_stand_ins_names_that_node_s_line(tmp_path):
    """Nodes are numbered as declared, stand-ins among them: node1 moved after the two stand-ins is at line 22."""
    first = "  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}\n"
    host = "externalHosts:\n  - {name: node1, ip: 192.168.56.101}\n"
    assert first in SLICED
    text = SLICED.replace(first, "", 1).replace("workload:\n", first + "workload:\n", 1)
    error = error_for(tmp_path, text.replace("externalHosts:\n", host, 1))
    assert error.field == "externalHosts[0].name" and "already used at line 22" in error.message, str(error)
