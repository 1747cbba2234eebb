"""What lab import says of a Service's externalIPs, which kube-proxy programs and nothing in a dump routes: the
cluster's network brings them to some node (a route, or a host answering ARP) that the objects do not show, so the
lab's way of bringing each is said. One outside the nodes' network is routed by the lab's underlay gateway to a
node (docs/scenarios.md, Topology); one inside it that no node holds is asked for by ARP and nothing answers for it,
so a host on the nodes' network loses what it sends there (but in ipvs mode without strictARP, where every node's
kernel answers for the addresses on kube-ipvs0)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from lab.describe.families import Family, family_of
from lab.describe.kubectl.cluster import Node
from lab.describe.kubectl.services import Service


def external_ip_notes(
    services: Iterable[Service], nodes: Iterable[Node], underlays: Mapping[Family, str], notes: list[str]
) -> None:
    """One line for each externalIP that is no node's own address: how the lab brings it to a node, or that nothing
    does."""
    held = {ip for node in nodes for ip in node.addresses.values()}
    for svc in services:
        for k, ip in enumerate(svc.external_ips):
            if ip in held:
                continue
            underlay = underlays[family_of(ip)]
            if ipaddress.ip_address(ip) in ipaddress.ip_network(underlay):
                said = (
                    f"{ip} is in the nodes' network {underlay} and no node holds it: nothing in the input answers ARP "
                    "for it (keepalived, kube-vip), so the lab's hosts there lose what they send to it, but in ipvs "
                    "mode without strictARP, where every node answers for it"
                )
            else:
                said = (
                    f"{ip}: outside the nodes' network, the lab's underlay gateway routes it to one node (a node with "
                    "a ready endpoint for externalTrafficPolicy Local, else the first), standing in for the cluster "
                    "network's route to it, which the input does not show"
                )
            notes.append(svc.obj.note(("spec", "externalIPs", k), said))
