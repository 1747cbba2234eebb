"""The translation chain (lab/probe/diagnosis.py) from the evidence a probe leaves: the rules the kernel says its
packets met (as iptables-save -c and the nft trace print them, copied from catalogue runs), the hops the captures
saw, and why render wrote each rule (render/kubeproxy/because.py, rendered from the catalogue scenario)."""

from __future__ import annotations

from pathlib import Path

from lab.describe.load import load_scenario
from lab.probe.diagnosis import DNAT, HAIRPIN, IPVS, MARKED, MASQUERADE, UNNAT, Bridge, PlacedReasons, diagnose
from lab.probe.evidence.base import RuleHit, in_backend
from lab.probe.observation import Hop
from lab.render.dataplane import rule_reasons
from lab.render.kubeproxy.because import kubelet_hairpin_mode

REPO = Path(__file__).resolve().parents[2]
NAMES = {"192.168.56.100": "client", "192.168.56.12": "node2", "10.244.1.2": "openresty", "10.244.1.1": "node1/cni0"}


def _because(path: str, **axes: str):
    (topo,) = load_scenario(REPO / "topologies" / path, {k: [v] for k, v in axes.items()}).variants
    return lambda node: PlacedReasons.of(rule_reasons(topo, node))


def _hop(actor: str, ifname: str, outgoing: bool, packet: str) -> Hop:
    return Hop(actor, ifname, outgoing, packet)


# The NodePort through node2, which has no endpoint (eTP Cluster): what the captures saw.
THROUGH_NODE2 = (
    _hop("node2", "eth0", False, "192.168.56.100:45166 > 192.168.56.12:30080 tcp [S]"),
    _hop("node2", "eth0", True, "192.168.56.12:27269 > 10.244.1.2:8080 tcp [S]"),
    _hop("node1", "eth0", False, "192.168.56.12:27269 > 10.244.1.2:8080 tcp [S]"),
    _hop("node1", "veth-openresty", True, "192.168.56.12:27269 > 10.244.1.2:8080 tcp [S]"),
    _hop("node1", "veth-openresty", False, "10.244.1.2:8080 > 192.168.56.12:27269 tcp [S.]"),
    _hop("node1", "eth0", True, "10.244.1.2:8080 > 192.168.56.12:27269 tcp [S.]"),
    _hop("node2", "eth0", False, "10.244.1.2:8080 > 192.168.56.12:27269 tcp [S.]"),
    _hop("node2", "eth0", True, "192.168.56.12:30080 > 192.168.56.100:45166 tcp [S.]"),
)
EXT = "KUBE-EXT-NXVI7ZHQBTBXMZW4"
IPTABLES_HITS = [
    ("node2", RuleHit("nat", "PREROUTING", '-m comment --comment "kubernetes service portals" -j KUBE-SERVICES', 1)),
    (
        "node2",
        RuleHit(
            "nat",
            EXT,
            '-m comment --comment "masquerade traffic for default/openresty:http external destinations" '
            "-j KUBE-MARK-MASQ",
            1,
        ),
    ),
    ("node2", RuleHit("nat", "KUBE-MARK-MASQ", "-j MARK --set-xmark 0x4000/0x4000", 1)),
    ("node2", RuleHit("nat", EXT, "-j KUBE-SVC-NXVI7ZHQBTBXMZW4", 1)),
    (
        "node2",
        RuleHit(
            "nat",
            "KUBE-SVC-NXVI7ZHQBTBXMZW4",
            '-m comment --comment "default/openresty:http -> 10.244.1.2:8080" -j KUBE-SEP-Q7ETOWDFIS73IRCX',
            1,
        ),
    ),
    (
        "node2",
        RuleHit(
            "nat",
            "KUBE-SEP-Q7ETOWDFIS73IRCX",
            '-p tcp -m comment --comment "default/openresty:http" -m tcp -j DNAT --to-destination 10.244.1.2:8080',
            1,
        ),
    ),
    ("node2", RuleHit("nat", "KUBE-POSTROUTING", "-j MARK --set-xmark 0x4000/0x0", 1)),
    (
        "node2",
        RuleHit(
            "nat",
            "KUBE-POSTROUTING",
            '-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
            1,
        ),
    ),
    ("node1", RuleHit("nat", "KUBE-POSTROUTING", "-m mark ! --mark 0x4000/0x4000 -j RETURN", 1)),
]


def test_the_nodeport_through_a_node_without_the_endpoint_is_masqueraded_because_of_etp_cluster():
    because = _because("nodeport-source-ip.yaml", proxyMode="iptables", externalTrafficPolicy="Cluster")
    diagnosis = diagnose(IPTABLES_HITS, THROUGH_NODE2, because, NAMES)
    assert [(s.kind, s.node) for s in diagnosis.steps] == [
        (DNAT, "node2"), (MARKED, "node2"), (MASQUERADE, "node2"), (UNNAT, "node2")
    ]  # fmt: skip
    assert diagnosis.summary() == "masqueraded on node2: externalTrafficPolicy Cluster"
    dnat, mark, masquerade, unnat = diagnosis.steps
    assert "to 10.244.1.2:8080 (openresty), chosen the only endpoint by nat KUBE-SVC-" in dnat.said
    assert mark.where == f"nat {EXT}" and str(mark.setting) == "externalTrafficPolicy Cluster"
    assert masquerade.source == ("192.168.56.100", "192.168.56.12")
    assert masquerade.setting == mark.setting and f"as marked by nat {EXT}" in masquerade.said
    assert "10.244.1.2:8080 > 192.168.56.12:27269 became 192.168.56.12:30080 > 192.168.56.100:45166" in unnat.said
    assert [s.name for s in diagnosis.settings] == ["externalTrafficPolicy"]


NFT_EXT = "external-TQEK22XR-default/openresty/tcp/http"
NFT_SVC = "service-TQEK22XR-default/openresty/tcp/http"
NFT_SEP = "endpoint-PNE3K2CU-default/openresty/tcp/http__10.244.1.2/8080"
NFT_HITS = [
    (
        "node2",
        RuleHit(
            "kube-proxy",
            NFT_EXT,
            "jump mark-for-masquerade (verdict jump mark-for-masquerade)",
            1,
            "jump mark-for-masquerade",
        ),
    ),
    (
        "node2",
        RuleHit(
            "kube-proxy",
            "mark-for-masquerade",
            "meta mark set meta mark | 0x00004000 (verdict continue)",
            1,
            "continue",
        ),
    ),
    (
        "node2",
        RuleHit(
            "kube-proxy",
            NFT_SVC,
            f"numgen random mod 1 vmap {{ 0 : goto {NFT_SEP} }} (verdict goto {NFT_SEP})",
            1,
            "goto",
        ),
    ),
    (
        "node2",
        RuleHit(
            "kube-proxy",
            NFT_SEP,
            "meta l4proto tcp dnat to 10.244.1.2:8080 (verdict accept)",
            1,
            "accept",
        ),
    ),
    (
        "node2",
        RuleHit("kube-proxy", "masquerading", "meta mark set meta mark ^ 0x00004000 (verdict continue)", 1, "continue"),
    ),
    ("node2", RuleHit("kube-proxy", "masquerading", "masquerade fully-random (verdict accept)", 1, "accept")),
]


def test_nftables_trace_gives_the_same_chain():
    because = _because("nodeport-source-ip.yaml", proxyMode="nftables", externalTrafficPolicy="Cluster")
    diagnosis = diagnose(NFT_HITS, THROUGH_NODE2, because, NAMES)
    assert [s.kind for s in diagnosis.steps] == [DNAT, MARKED, MASQUERADE, UNNAT]
    assert diagnosis.summary() == "masqueraded on node2: externalTrafficPolicy Cluster"
    assert f"chosen the only endpoint by kube-proxy {NFT_SVC}" in diagnosis.steps[0].said


def test_a_step_the_evidence_does_not_show_is_not_said():
    """The same rules written, but no rule met and no capture: nothing to say. The masquerade rule met without
    captures of the node: masqueraded, the source change not claimed, and no summary."""
    because = _because("nodeport-source-ip.yaml", proxyMode="iptables", externalTrafficPolicy="Cluster")
    assert diagnose([], (), because, NAMES).steps == ()
    masquerade_only = [hit for hit in IPTABLES_HITS if hit[1].verdict == "MASQUERADE"]
    (step,) = diagnose(masquerade_only, (), because, NAMES).steps
    assert step.kind == MASQUERADE and step.source is None and step.setting is None
    assert "no capture shows its source" in step.said and "no mark for it among the rules the lab read" in step.said
    assert diagnose(masquerade_only, (), because, NAMES).summary() == ""


def test_a_masquerade_kube_proxy_did_not_mark_is_put_down_to_its_own_rule():
    flannel = RuleHit("nat", "FLANNEL-POSTRTG", "-s 10.244.0.0/16 ! -d 224.0.0.0/4 -j MASQUERADE --random-fully", 1)
    hops = THROUGH_NODE2[:2]
    diagnosis = diagnose([("node2", flannel)], hops, lambda node: PlacedReasons.of(()), NAMES)
    (step,) = diagnosis.steps
    assert step.setting is None and step.rewrote_source
    assert diagnosis.summary() == "masqueraded on node2 by nat FLANNEL-POSTRTG"


HAIRPIN_HOPS = (
    _hop("node1", "veth-web", False, "10.244.1.2:38296 > 10.96.0.10:80 tcp [S]"),
    _hop("node1", "veth-web", True, "10.244.1.1:57767 > 10.244.1.2:8080 tcp [S]"),
    _hop("node1", "veth-web", False, "10.244.1.2:8080 > 10.244.1.1:57767 tcp [S.]"),
    _hop("node1", "veth-web", True, "10.96.0.10:80 > 10.244.1.2:38296 tcp [S.]"),
)


def test_a_pod_reaching_itself_is_hairpinned_by_the_bridge_port_it_came_in_by():
    because = _because("hairpin.yaml", proxyMode="ipvs", hairpinMode="hairpin-veth")
    loop_back = RuleHit(
        "nat",
        "KUBE-POSTROUTING",
        '-m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set '
        "--match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE",
        1,
    )
    bridge = Bridge("cni0", frozenset({"veth-web"}), kubelet_hairpin_mode("hairpin-veth"))
    diagnosis = diagnose([("node1", loop_back)], HAIRPIN_HOPS, because, {"10.244.1.1": "node1/cni0"}, bridge)
    assert [s.kind for s in diagnosis.steps] == [IPVS, MASQUERADE, HAIRPIN, UNNAT]
    ipvs, masquerade, hairpin, _ = diagnosis.steps
    assert (
        "virtual server 10.96.0.10:80 to 10.244.1.2:8080, chosen by the rr scheduler among 1 real server" in ipvs.said
    )
    assert masquerade.setting.name == "kube-proxy's hairpin masquerade"
    assert hairpin.where == "cni0" and str(hairpin.setting) == "hairpinMode hairpin-veth"
    assert diagnosis.summary() == (
        "masqueraded on node1: kube-proxy's hairpin masquerade (always written); "
        "hairpinned on node1 through cni0: hairpinMode hairpin-veth"
    )


def test_a_packet_that_leaves_by_another_port_is_no_hairpin():
    bridge = Bridge("cni0", frozenset({"veth-web", "veth-other"}), kubelet_hairpin_mode("hairpin-veth"))
    hops = (HAIRPIN_HOPS[0], _hop("node1", "veth-other", True, "10.244.1.2:38296 > 10.244.1.3:8080 tcp [S]"))
    assert diagnose([], hops, lambda node: PlacedReasons.of(()), {}, bridge).steps == ()


def test_ipvs_forwarding_is_said_only_where_the_destination_changed_at_a_virtual_server():
    because = _because("nodeport-source-ip.yaml", proxyMode="ipvs", externalTrafficPolicy="Cluster")
    (ipvs, _) = diagnose([], THROUGH_NODE2, because, NAMES).steps
    assert ipvs.kind == IPVS and ipvs.node == "node2"
    assert "virtual server 192.168.56.12:30080 to 10.244.1.2:8080 (openresty)" in ipvs.said
    # node1 only routed it: no step there.
    assert [s.node for s in diagnose([], THROUGH_NODE2, because, NAMES).steps] == ["node2", "node2"]


def test_the_clients_later_segments_are_forward_not_replies():
    """The client's ACK after the SYN-ACK goes the way the connection was opened: DNATed again on node2, it is no
    reply un-NATed there."""
    because = _because("nodeport-source-ip.yaml", proxyMode="iptables", externalTrafficPolicy="Cluster")
    ack = (
        _hop("node2", "eth0", False, "192.168.56.100:45166 > 192.168.56.12:30080 tcp [.]"),
        _hop("node2", "eth0", True, "192.168.56.12:27269 > 10.244.1.2:8080 tcp [.]"),
    )
    steps = diagnose(IPTABLES_HITS, THROUGH_NODE2 + ack, because, NAMES).steps
    assert [s.kind for s in steps].count(UNNAT) == 1, [s.said for s in steps]


def test_a_node_crossed_twice_is_said_masqueraded_where_the_captures_saw_the_source_change():
    """Out to a load balancer and back: the first pass through node2 leaves the source as it was, the second
    rewrites it; the node's rules counted both passes together."""
    because = _because("nodeport-source-ip.yaml", proxyMode="iptables", externalTrafficPolicy="Cluster")
    out_and_back = (
        _hop("node2", "eth0", False, "192.168.56.100:45166 > 192.168.56.12:30080 tcp [S]"),
        _hop("node2", "eth0", True, "192.168.56.100:45166 > 192.168.56.12:30080 tcp [S]"),
        *THROUGH_NODE2[:2],
    )
    masquerade = next(s for s in diagnose(IPTABLES_HITS, out_and_back, because, NAMES).steps if s.kind == MASQUERADE)
    assert masquerade.source == ("192.168.56.100", "192.168.56.12")


def test_ip_masq_agent_s_masquerade_names_its_non_masquerade_cidrs():
    from lab.describe.topology import MasqAgentSpec
    from lab.install.actors import masq_agent_reasons

    agent = MasqAgentSpec(non_masquerade_cidrs=("10.0.0.0/8", "172.16.0.0/12"), nodes=("node2",))
    rule = (
        '-m comment --comment "ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must come '
        'after cluster-local CIDR matches)" -m addrtype ! --dst-type LOCAL -j MASQUERADE'
    )
    returned = RuleHit("nat", "IP-MASQ-AGENT", "-d 10.0.0.0/8 -m addrtype ! --dst-type LOCAL -j RETURN", 1)
    traced = "fib daddr type != local counter packets 0 bytes 0 masquerade (verdict accept)"  # iptables-nft, traced
    for hit in (RuleHit("nat", "IP-MASQ-AGENT", rule, 1), RuleHit("nat", "IP-MASQ-AGENT", traced, 1, "accept")):
        reasons = lambda node: PlacedReasons.of(masq_agent_reasons(agent))  # noqa: E731
        diagnosis = diagnose([("node2", returned), ("node2", hit)], THROUGH_NODE2[:2], reasons, NAMES)
        assert [s.kind for s in diagnosis.steps] == [MASQUERADE]
        assert diagnosis.summary() == "masqueraded on node2: nonMasqueradeCIDRs 10.0.0.0/8, 172.16.0.0/12"


def test_a_reason_is_found_through_the_backend_its_rule_is_named_with():
    """ip-masq-agent's rules in the host's backend, read beside kube-proxy's in the other (OtherBackendEvidence):
    the step names the backend and the reason."""
    from lab.describe.topology import MasqAgentSpec
    from lab.install.actors import masq_agent_reasons

    agent = MasqAgentSpec(non_masquerade_cidrs=("10.0.0.0/8",), nodes=("node2",))
    legacy = in_backend("legacy", "nat")
    hit = RuleHit(legacy, "IP-MASQ-AGENT", "-m addrtype ! --dst-type LOCAL -j MASQUERADE", 1)
    reasons = PlacedReasons.of(masq_agent_reasons(agent))
    assert reasons.reason(hit) is not None
    diagnosis = diagnose([("node2", hit)], THROUGH_NODE2[:2], lambda node: reasons, NAMES)
    assert diagnosis.summary() == "masqueraded on node2: nonMasqueradeCIDRs 10.0.0.0/8"
    (step,) = diagnosis.steps
    assert step.said.startswith("masqueraded by iptables-legacy nat IP-MASQ-AGENT"), step.said
    bridged = RuleHit("bridge nat", "IP-MASQ-AGENT", hit.rule, 1)  # ebtables' tables are no iptables backend's
    assert reasons.reason(bridged) is None
