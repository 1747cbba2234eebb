"""What a cluster reaches on no node is imported as such: a LoadBalancer Service's spec.loadBalancerIP that no load
balancer gave it (status.loadBalancer.ingress without it) is left out and said, as kube-proxy programs only the
status's addresses; an externalIP no node holds is said with how the lab brings it to a node, or that nothing does."""

from __future__ import annotations

from pathlib import Path

from test_kubectl_import import FIXTURES, SHOP, imported, loaded, notes_about

METALLB = FIXTURES / "metallb-l2"
GIVEN = """\
  status:
    loadBalancer:
      ingress:
      - ip: 192.168.56.241
        ipMode: VIP
"""


def pending_dump(tmp_path: Path) -> list[str]:
    """The metallb-l2 dump with web's address asked for in spec.loadBalancerIP and not given (status empty)."""
    text = (METALLB / "dump.yaml").read_text()
    assert text.count(GIVEN) == 1
    text = text.replace(GIVEN, "  status:\n    loadBalancer: {}\n").replace(
        "    clusterIP: 10.96.71.12\n", "    clusterIP: 10.96.71.12\n    loadBalancerIP: 192.168.56.241\n"
    )
    dump = tmp_path / "dump.yaml"
    dump.write_text(text)
    return [str(dump), *(str(METALLB / f) for f in ("kube-proxy.yaml", "version.yaml", "metallb.yaml"))]


def test_a_load_balancer_ip_asked_for_and_not_given_is_left_out(tmp_path):
    result = imported(pending_dump(tmp_path))
    web = next(m for m in result.scenario["workload"] if m["kind"] == "Service" and m["metadata"]["name"] == "web")
    assert "loadBalancerIP" not in web["spec"] and "status" not in web
    (said,) = notes_about(result, "Service default/web: spec.loadBalancerIP", "192.168.56.241")
    assert "not in status.loadBalancer.ingress" in said and "reached on no node" in said
    assert not [p for p in result.scenario["probes"] if "web" in p["name"] and "load-balancer" in p["name"]]
    topo = loaded(tmp_path, result)
    assert not next(s for s in topo.services if s.name == "web").ingress_ips


def shop_with_external_ip(tmp_path: Path, ip: str) -> list[str]:
    text = Path(SHOP[0]).read_text()
    assert text.count("    - 198.51.100.20\n") == 1
    dump = tmp_path / "dump.yaml"
    dump.write_text(text.replace("    - 198.51.100.20\n", f"    - {ip}\n"))
    return [str(dump), *SHOP[1:]]


def test_an_external_ip_outside_the_nodes_network_is_said_to_be_routed_by_the_gateway():
    (said,) = notes_about(imported(SHOP), "spec.externalIPs[0]", "198.51.100.20")
    assert "the lab's underlay gateway routes it to one node" in said


def test_an_external_ip_in_the_nodes_network_that_no_node_holds_is_said_to_be_lost(tmp_path):
    (said,) = notes_about(imported(shop_with_external_ip(tmp_path, "10.0.2.200")), "spec.externalIPs[0]", "10.0.2.200")
    assert "no node holds it: nothing in the input answers ARP for it" in said


def test_a_nodes_own_address_as_external_ip_is_not_said(tmp_path):
    assert not notes_about(imported(shop_with_external_ip(tmp_path, "10.0.1.15")), "spec.externalIPs[0]")
