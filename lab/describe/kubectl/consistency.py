"""What no cluster's objects hold, though each object alone reads well: the checks the API server and its
allocators make as objects are created, which a dump fails only when edited by hand or joined from two clusters
(or two moments of one). Each is refused naming both places, rather than one object silently winning.

The API server's rules are kubernetes/kubernetes' at 000f26050b9be6fb3d79fae95e06b47fc96128cd,
pkg/apis/core/validation/validation.go: validateServicePort (a Service of more than one port names each, every
name once) and ValidateService ("Check for duplicate NodePorts, considering (protocol,port) pairs", and the same for
ports); its allocators', at 00bdb3fade2ef1ada898bd8fae2c6a1958da3a5d, pkg/registry/core/service/portallocator/
allocator.go: a node port is allocated by its number alone, once in the cluster ("provided port is already
allocated"; one Service's TCP and UDP port of one number take it once), healthCheckNodePort from the same range, and
a cluster IP once likewise (ipallocator).
"""

from __future__ import annotations

from typing import Any

from lab.describe.kubectl.cluster import Pod
from lab.describe.kubectl.objects import Obj
from lab.describe.yamlsrc import FieldPath

_AGAIN = "are these dumps of two clusters, or of two moments?"


def refuse_conflicting_ports(obj: Obj) -> None:
    """A Service's ports: each named where there are several, and no name, no (protocol, port) and no
    (protocol, nodePort) twice."""
    ports = obj.each(("spec", "ports"))
    first: dict[tuple[str, Any], int] = {}
    for path, _ in ports:
        protocol = obj.get((*path, "protocol"), str, "TCP")
        name = obj.get((*path, "name"), str, "")
        if len(ports) > 1 and not name:
            raise obj.error(
                (*path, "name"), "missing: the API server requires a name of each port of a Service of several"
            )
        for field, value, shown in (
            ("name", name, repr(name)),
            ("port", (protocol, obj.get((*path, "port"), int)), ""),
            ("nodePort", (protocol, obj.get((*path, "nodePort"), int)), ""),
        ):
            if not value or (isinstance(value, tuple) and not value[1]):
                continue
            if (field, value) in first:
                said = shown or f"{value[1]} ({protocol})"
                both = "name" if field == "name" else f"{field} and protocol"
                raise obj.error(
                    (*path, field),
                    f"{said} is ports[{first[(field, value)]}]'s {field} too: the API server refuses two ports of one "
                    f"Service with the same {both}",
                )
            first[(field, value)] = int(path[-1])


def refuse_reused_allocations(services: list[Obj]) -> None:
    """No node port (of any protocol, healthCheckNodePort too) and no cluster IP is two Services'."""
    holder: dict[tuple[str, Any], tuple[Obj, FieldPath]] = {}
    for obj in services:
        for kind, value, path in _allocations(obj):
            other, at = holder.setdefault((kind, value), (obj, path))
            if other is not obj:
                line = other.src.line_of((*other.path, *at))
                raise obj.error(
                    path,
                    f"{value} is also Service {other.key}'s ({other.src.file} at line {line}): a cluster gives each "
                    f"{kind} to one Service; {_AGAIN}",
                )


def _allocations(obj: Obj) -> list[tuple[str, Any, FieldPath]]:
    """What the allocators gave the Service: its node ports and its cluster IPs, each with its field."""
    found: list[tuple[str, Any, FieldPath]] = []
    for path, _ in obj.each(("spec", "ports")):
        if number := obj.get((*path, "nodePort"), int):
            found.append(("node port", number, (*path, "nodePort")))
    if number := obj.get(("spec", "healthCheckNodePort"), int):
        found.append(("node port", number, ("spec", "healthCheckNodePort")))
    ips = obj.each(("spec", "clusterIPs")) or [(("spec", "clusterIP"), obj.get(("spec", "clusterIP"), str))]
    found += [("cluster IP", ip, path) for path, ip in ips if isinstance(ip, str) and ip not in ("", "None")]
    return found


def refuse_shared_addresses(pods: list[Pod]) -> None:
    """Two running pods off the host network never share an address in one cluster (the CNI's IPAM hands each out
    once; a hostNetwork pod has its node's, and is not among these), and which pod an endpoint at the address is
    could not be told."""
    holder: dict[str, Pod] = {}
    for pod in pods:
        for ip in pod.ips.values():
            if (other := holder.setdefault(ip, pod)) is not pod:
                line = other.obj.src.line_of((*other.obj.path, "status", "podIP"))
                raise pod.obj.error(
                    ("status", "podIP"),
                    f"{ip} is also the address of Pod {other.namespace}/{other.name} ({other.obj.src.file} at line "
                    f"{line}), running too: a cluster gives each running pod its own address; {_AGAIN}",
                )
