"""What a cluster reaches on no node is imported as such: a LoadBalancer Service's spec.loadBalancerIP that no load
balancer gave it (status.loadBalancer.ingress without it) is left out and said, as kube-proxy programs only the
status's addresses."""

from __future__ import annotations

from pathlib import Path

from test_kubectl_import import FIXTURES, imported, loaded, notes_about

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
