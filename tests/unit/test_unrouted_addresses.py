"""A frontend address inside the underlay that no host holds is warned of (lab/describe/resolve/unrouted.py): a host
on the underlay loses what it sends there for want of an ARP answer (tests/integration/topologies/
unannounced-address.yaml shows it); one a host holds, one outside the underlay, one a layer 2 speaker announces and
any in ipvs mode without strictARP (every node answers for it) are not."""

from __future__ import annotations

import pytest
from support.scenario import BASE, write

from lab.describe.load import load_scenario


def external_ip(ip: str) -> str:
    return BASE.replace("      type: NodePort\n", f"      type: NodePort\n      externalIPs: [{ip}]\n")


LB = BASE.replace("      type: NodePort\n", "      type: LoadBalancer\n").replace(
    "      ports: [{name: http, port: 80, targetPort: http}]\n",
    "      ports: [{name: http, port: 80, targetPort: http}]\n"
    "    status: {loadBalancer: {ingress: [{ip: 192.168.56.60}]}}\n",
)


def warnings(tmp_path, text: str) -> list[str]:
    return [w for w in load_scenario(write(tmp_path, text)).warnings if "is inside the underlay" in w]


def test_an_external_ip_nobody_holds_inside_the_underlay_is_warned_of(tmp_path):
    (said,) = warnings(tmp_path, external_ip("192.168.56.50"))
    assert "workload[1].spec.externalIPs: web's externalIP 192.168.56.50 is inside the underlay" in said
    assert "nothing answers" in said and "keepalived or kube-vip" in said


def test_a_load_balancer_address_nobody_announces_is_warned_of(tmp_path):
    (said,) = warnings(tmp_path, LB)
    assert "workload[1].status.loadBalancer: web's load balancer address 192.168.56.60" in said


@pytest.mark.parametrize(
    "text",
    [
        external_ip("192.168.56.11"),  # node1's own address
        external_ip("192.168.56.100"),  # the client's
        external_ip("203.0.113.10"),  # outside: the gateway routes it to a node
        external_ip("192.168.56.50").replace("cluster: {", "cluster: {proxyMode: ipvs, "),
    ],
)
def test_addresses_that_are_reached_are_not(tmp_path, text):
    assert warnings(tmp_path, text) == []


def test_ipvs_with_strict_arp_is_warned_of(tmp_path):
    text = external_ip("192.168.56.50").replace("cluster: {", "cluster: {proxyMode: ipvs, ipvs: {strictARP: true}, ")
    assert len(warnings(tmp_path, text)) == 1
