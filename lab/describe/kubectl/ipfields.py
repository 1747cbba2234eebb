"""The address and network fields of a kubectl dump, read through the one parser (lab/describe/ip.py) at the
field's line: a value Kubernetes would not take is refused in words naming the file, line, object and field; a
legacy form it takes (`010.1.1.1`, `::ffff:10.1.1.1`) is read as it reads it and said, since the scenario then
holds another spelling than the dump."""

from __future__ import annotations

from typing import Any

from lab.describe.ip import AddressError, canonical_ip, canonical_network
from lab.describe.kubectl.objects import Obj
from lab.describe.yamlsrc import FieldPath


def _read(obj: Obj, path: FieldPath, value: Any, notes: list[str], parse: Any, what: str) -> str:
    if not isinstance(value, str):
        raise obj.error(path, f"expected {what} as text, got {value!r}")
    try:
        canonical = parse(value)
    except AddressError as exc:
        raise obj.error(path, str(exc)) from None
    if canonical != value.strip() and canonical != value.strip().lower():
        notes.append(obj.note(path, f"{value.strip()} read as {canonical}, as Kubernetes reads it"))
    return canonical


def address(obj: Obj, path: FieldPath, value: Any, notes: list[str]) -> str:
    """An IP address field (clusterIP(s), podIP(s), a node's InternalIP, an endpoint's address, an external or a
    load balancer's IP), canonical."""
    return _read(obj, path, value, notes, canonical_ip, "an IP address")


def source_range(obj: Obj, path: FieldPath, value: Any, notes: list[str]) -> str:
    """A loadBalancerSourceRanges entry: space around it allowed (ValidateService trims it, a historical
    allowance), host bits allowed (the network they are in, as kube-proxy's ParseCIDRSloppy reads it)."""
    return _read(obj, path, value, notes, lambda text: canonical_network(text.strip()), "a CIDR")


def network(obj: Obj, path: FieldPath, value: Any, notes: list[str]) -> str:
    """A network field (a node's podCIDR(s)): the network ParseCIDRSloppy reads, host bits masked."""
    return _read(obj, path, value, notes, canonical_network, "a network such as 10.244.1.0/24")
