"""Layer 2 load balancers (MetalLB L2, kube-vip ARP): which node announces each VIP, the errors a user sees for a
VIP or field the lab cannot model, and the speaker's ARP answer."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario
from lab.install.speaker import arp_reply

BASE = """\
name: t
cluster: {kubeVersion: "1.31", clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/16, underlay: 192.168.56.0/24}
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
  - {name: node2, ip: 192.168.56.12, podCIDR: 10.244.2.0/24}
  - {name: node3, ip: 192.168.56.13, podCIDR: 10.244.3.0/24}
externalHosts:
  - {name: client, ip: 192.168.56.100}
loadBalancers:
  - {name: metallb, mode: layer2}
workload:
  - kind: Pod
    metadata: {name: web, labels: {app: web}}
    spec: {nodeName: node3, containers: [{ports: [{name: http, containerPort: 8080}]}]}
  - kind: Service
    metadata: {name: web}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Cluster
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: http}]
    status: {loadBalancer: {ingress: [{ip: 192.168.56.240}]}}
probes:
  - {name: p, from: client, to: {service: web, port: http, via: loadBalancer}, expect: {outcome: delivered}}
"""


def load(tmp_path: Path, text: str = BASE):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_scenario(path).variants[0]


def error_for(tmp_path: Path, text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load(tmp_path, text)
    return info.value


def test_cluster_policy_elects_the_lowest_hash_of_node_and_vip(tmp_path):
    topo = load(tmp_path)
    (a,) = topo.announcements
    ranked = sorted(["node1", "node2", "node3"], key=lambda n: hashlib.sha256(f"{n}#192.168.56.240".encode()).digest())
    assert (a.vip, a.service, a.announcer) == ("192.168.56.240", "default/web", ranked[0])
    assert ranked[0] != "node3"  # the hash, not the endpoint, decides for Cluster
    assert topo.load_balancers == () and topo.lb_routes == ()  # no LB host; the gateway asks ARP like any host


def test_local_policy_elects_only_a_node_with_a_ready_local_endpoint(tmp_path):
    (a,) = load(tmp_path, BASE.replace("Policy: Cluster", "Policy: Local")).announcements
    assert a.announcer == "node3"


def test_announcer_pins_the_node(tmp_path):
    (a,) = load(tmp_path, BASE.replace("mode: layer2}", "mode: layer2, announcer: node2}")).announcements
    assert (a.announcer, a.how) == ("node2", "pinned by `announcer`")


def test_nobody_announces_a_service_without_a_ready_endpoint(tmp_path):
    topo = load(tmp_path, BASE.replace("app: web}\n      ports", "app: none}\n      ports"))
    (a,) = topo.announcements
    assert a.announcer == "" and "no ready endpoint" in a.how
    assert "loadBalancers[0]: nobody answers ARP for default/web's VIP 192.168.56.240" in topo.warnings[-1]


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("{ip: 192.168.56.240}", "{ip: 172.19.100.2}", "loadBalancers[0].services", "outside the underlay"),
        ("{ip: 192.168.56.240}", "{ip: 192.168.56.12}", "loadBalancers[0].services", "already node2's address"),
        ("{ip: 192.168.56.240}", "{ip: 192.168.56.1}", "loadBalancers[0].services", "already the fabric's"),
        ("mode: layer2}", "mode: layer2, address: 192.168.56.2}", "loadBalancers[0].address", "there is none"),
        ("mode: layer2}", "mode: layer2, forward: vip}", "loadBalancers[0].forward", "there is none"),
        ("mode: layer2}", "announcer: node2}", "loadBalancers[0].announcer", "only a `mode: layer2`"),
        ("mode: layer2}", "mode: layer2, announcer: node9}", "loadBalancers[0].announcer", "not a node of"),
        (
            "mode: layer2}",
            "mode: layer2, nodes: [node1], announcer: node2}",
            "loadBalancers[0].announcer",
            "not a node of `nodes` (node1)",
        ),
        (
            "Policy: Cluster",
            "Policy: Local",
            "",
            "",
        ),
    ],
)
def test_what_the_lab_cannot_model_is_refused_at_its_field(tmp_path, old, new, field, message):
    text = BASE.replace(old, new)
    if not field:  # Local with a pinned node that has no ready local endpoint: MetalLB would never elect it
        text = text.replace("mode: layer2}", "mode: layer2, announcer: node1}")
        field, message = "loadBalancers[0].announcer", "MetalLB never elects node1"
    error = error_for(tmp_path, text)
    assert error.field == field, str(error)
    assert message in error.message, error.message


MAC = bytes.fromhex("02aabbccdd01")
ASKER = bytes.fromhex("02aabbccdd99")
VIP = bytes([192, 168, 56, 240])


def request(target: bytes, destination: bytes = b"\xff" * 6, oper: int = 1) -> bytes:
    head = destination + ASKER + struct.pack("!H", 0x0806)
    return head + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, oper, ASKER, bytes([192, 168, 56, 100]), b"", target)


def test_the_speaker_answers_a_request_for_its_vip_with_its_own_mac():
    reply = arp_reply(request(VIP), frozenset({VIP}), MAC)
    assert reply is not None
    assert reply[:12] == ASKER + MAC
    _, _, _, _, oper, sha, spa, tha, tpa = struct.unpack_from("!HHBBH6s4s6s4s", reply, 14)
    assert (oper, sha, spa, tha, tpa) == (2, MAC, VIP, ASKER, bytes([192, 168, 56, 100]))


@pytest.mark.parametrize(
    "frame",
    [
        request(bytes([192, 168, 56, 241])),  # another address: the kernel's or nobody's business
        request(VIP, oper=2),  # a reply
        request(VIP, destination=bytes.fromhex("02aabbccdd42")),  # unicast to another host
        request(VIP)[:30],  # truncated
    ],
)
def test_the_speaker_ignores_every_other_frame(frame):
    assert arp_reply(frame, frozenset({VIP}), MAC) is None


def variants(tmp_path: Path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_scenario(path).variants


def test_announcer_as_a_matrix_axis_pins_each_variant_to_its_node(tmp_path):
    text = BASE + "matrix:\n  announcer: [node1, node3]\n"
    topos = variants(tmp_path, text)
    assert [dict(t.variant)["announcer"] for t in topos] == ["node1", "node3"]
    assert [(t.announcements[0].announcer, t.announcements[0].how) for t in topos] == [
        ("node1", "pinned by `announcer`"),
        ("node3", "pinned by `announcer`"),
    ]


def test_an_announcer_axis_value_metallb_never_elects_is_named_at_its_line(tmp_path):
    text = BASE.replace("Policy: Cluster", "Policy: Local") + "matrix:\n  announcer: [node3, node1]\n"
    error = error_for(tmp_path, text)
    assert error.field == "matrix.announcer[1]", str(error)
    assert "MetalLB never elects node1" in error.message


def test_an_announcer_axis_without_a_layer2_load_balancer_is_refused(tmp_path):
    text = BASE.replace("mode: layer2}", "mode: external}") + "matrix:\n  announcer: [node1]\n"
    error = error_for(tmp_path, text)
    assert error.field == "matrix.announcer", str(error)
    assert "`loadBalancers` has none" in error.message


def test_a_when_announcer_that_names_no_node_is_refused(tmp_path):
    text = BASE + "matrix:\n  announcer: [node1, node3]\n"
    text = text.replace(
        "expect: {outcome: delivered}}", "expect: [{when: {announcer: nodeX}, outcome: dropped}, {outcome: delivered}]}"
    )
    error = error_for(tmp_path, text)
    assert error.field == "probes[0].expect[0].when.announcer", str(error)
    assert "'nodeX' is no value of announcer" in error.message


def test_strict_arp_as_a_matrix_axis(tmp_path):
    text = (
        BASE.replace('kubeVersion: "1.31"', 'kubeVersion: "1.31", proxyMode: ipvs')
        + "matrix:\n  strictARP: [true, false]\n"
    )
    text = text.replace(
        "expect: {outcome: delivered}}",
        "expect: [{when: {strictARP: true}, outcome: delivered}, {outcome: delivered, entries: [node1]}]}",
    )
    topos = variants(tmp_path, text)
    assert [(dict(t.variant)["strictARP"], t.cluster.ipvs_strict_arp) for t in topos] == [(True, True), (False, False)]
    assert [t.probes[0].expected.entries for t in topos] == [(), ("node1",)]
