"""IP families as the API server decides them: which families a Service gets, from its ipFamilyPolicy, ipFamilies
and clusterIPs and the families the cluster's service CIDRs cover; and which addresses an EndpointSlice of an
address type may hold.

The rules are Kubernetes' own, read in kubernetes/kubernetes at b0d609f08083d7a8aa3426540d6d5f9090944906:
pkg/apis/core/validation/validation.go ValidateServiceClusterIPsRelatedFields (clusterIPs against clusterIP and
ipFamilies), pkg/registry/core/service/storage/alloc.go initIPFamilyFields (the policy's default, families inferred
from clusterIPs, what the cluster is configured for, the second family PreferDualStack and RequireDualStack add),
and pkg/apis/discovery/validation/validation.go validateEndpoints (an address of the slice's addressType). Each
problem is returned in words, with the field it is about, as the API server words it; describe raises them at the
field's line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator

from lab.describe import ip as iptext

Family = Literal["IPv4", "IPv6"]
FAMILIES: tuple[Family, ...] = ("IPv4", "IPv6")
Policy = Literal["SingleStack", "PreferDualStack", "RequireDualStack"]


def family_of(text: str) -> Family | None:
    """The family of an address or a network written as Kubernetes takes them (lab/describe/ip.py); None for
    neither."""
    family = iptext.family_of(text)
    return "IPv4" if family == "IPv4" else "IPv6" if family == "IPv6" else None


def endpoint(host: str, port: int) -> str:
    """ "host:port" as a socket's address is written: "[host]:port" for IPv6, whose address holds colons."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_port(text: str) -> tuple[str, int]:
    """ "host:port" or "[host]:port" (as endpoint writes them) → (host, port)."""
    host, _, port = text.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def split(value: str) -> tuple[str, ...]:
    """A field that takes one value per family: "10.244.0.0/16" or "10.244.0.0/16,fd00:10:244::/56"."""
    return tuple(part.strip() for part in value.split(","))


def one_address(value: str) -> str:
    """One address of either family, canonical (Kubernetes' parsing: lab/describe/ip.py)."""
    return iptext.canonical_ip(value)


def host_address(value: str) -> str:
    """The address of a host the lab builds or sends to from outside the cluster (a node, an external host, a
    load balancer and its ingress IP, an egress gateway): one a host can have."""
    return _host_address(value, kubernetes_checks=False)


def external_address(value: str) -> str:
    """A Service's external IP or an EndpointSlice's address: ValidateNonSpecialIP's refusals in the API server's
    words, and what no host of the lab can be."""
    return _host_address(value, kubernetes_checks=True)


def _host_address(value: str, kubernetes_checks: bool) -> str:
    """value, canonical, or what iptext.host_problem finds in it as the error (pydantic's AfterValidator)."""
    address = iptext.parse_ip(value)
    if problem := iptext.host_problem(address, kubernetes_checks):
        raise ValueError(problem)
    return str(address)


Address = Annotated[str, AfterValidator(one_address)]
HostAddress = Annotated[str, AfterValidator(host_address)]
ExternalAddress = Annotated[str, AfterValidator(external_address)]


def _per_family(value: str, one: Callable[[str], str], example: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text such as {example!r}, got {value!r}")
    parts = tuple(one(part) for part in split(value))  # space around a part is the lab's format, not an address
    if len(parts) > 2 or (len(parts) == 2 and family_of(parts[0]) == family_of(parts[1])):
        raise ValueError(
            f"expected one value per family, at most an IPv4 and an IPv6 one separated by a comma (the first is the"
            f" primary family), such as {example!r}; got {value!r}"
        )
    return ",".join(parts)


def addresses(value: str) -> str:
    """One address, or one per family separated by a comma, as kubelet's --node-ip takes them: a node's."""
    return _per_family(value, host_address, "192.168.56.11,fd00:56::11")


def one_network(value: str) -> str:
    """A network of either family written as such: 10.244.1.0/24 or fd00:10:244:1::/64, not a host in it."""
    return iptext.canonical_network(value, exact=True)


def source_range(value: str) -> str:
    """A loadBalancerSourceRanges entry of either family, as the API server and kube-proxy read it: space around
    it trimmed (a historical allowance of ValidateService), host bits allowed (the network they are in). Each
    family's proxier keeps its own family's entries (docs/ipv6.md)."""
    try:
        return iptext.canonical_network(value.strip() if isinstance(value, str) else value)
    except iptext.AddressError as exc:
        raise ValueError(f"expected a CIDR such as 203.0.113.0/24 or 2001:db8::/64, got {value!r} ({exc})") from None


SourceRange = Annotated[str, AfterValidator(source_range)]


def networks(value: str) -> str:
    """One network, or one per family separated by a comma, as kube-proxy's --cluster-cidr takes them."""
    return _per_family(value, one_network, "10.244.0.0/16,fd00:10:244::/56")


def overlap(a: str, b: str) -> bool:
    """Whether two networks of any families share an address (never across families)."""
    na, nb = iptext.parse_network(a), iptext.parse_network(b)
    return na.version == nb.version and na.overlaps(nb)  # type: ignore[arg-type]


def other(family: Family) -> Family:
    return "IPv6" if family == "IPv4" else "IPv4"


@dataclass(frozen=True)
class Problem:
    """What the API server refuses: the field (under the Service's spec) and why, in its words."""

    field: tuple[str | int, ...]
    message: str


@dataclass(frozen=True)
class ServiceFamilies:
    """A Service's families as the API server stores them: the policy, and ipFamilies in order (the first is the
    primary: clusterIP's family)."""

    policy: Policy
    families: tuple[Family, ...]


def service_families(
    policy: Policy | None,
    families: Sequence[str],
    cluster_ip: str | None,
    cluster_ips: Sequence[str],
    configured: Sequence[Family],
) -> ServiceFamilies | Problem:
    """A new Service's policy and families in a cluster whose service CIDRs cover `configured` (the first is the
    default family); the first problem the API server would report otherwise. Headless Services are not modelled
    (describe has none)."""
    if cluster_ip and not cluster_ips:
        cluster_ips = [cluster_ip]  # the API server's strategy fills clusterIPs from clusterIP
    if problem := _related_fields(families, cluster_ip, cluster_ips):
        return problem
    chosen: Policy = policy or "SingleStack"
    dual = "must be 'RequireDualStack' or 'PreferDualStack' when multiple"
    if chosen == "SingleStack" and len(cluster_ips) == 2:
        return Problem(("ipFamilyPolicy",), f"{dual} cluster IPs are specified")
    if chosen == "SingleStack" and len(families) == 2:
        return Problem(("ipFamilyPolicy",), f"{dual} IP families are specified")
    result: list[Family] = [f for given in families for f in FAMILIES if f == given]
    for i, ip in enumerate(cluster_ips):
        family = family_of(ip)
        assert family is not None  # _related_fields checked every address
        if i >= len(result):
            if family not in configured:
                return Problem(("clusterIPs", i), f"{family} is not configured on this cluster")
            result.append(family)
    if chosen == "RequireDualStack" and len(configured) < 2:
        return Problem(("ipFamilyPolicy",), "this cluster is not configured for dual-stack services")
    for i, family in enumerate(result):
        if family not in configured:
            return Problem(("ipFamilies", i), f"{family} is not configured on this cluster")
    if not result:
        result = [configured[0]]
    if chosen != "SingleStack" and len(result) == 1 and len(configured) == 2:
        result.append(other(result[0]))
    return ServiceFamilies(chosen, tuple(result))


def _related_fields(families: Sequence[str], cluster_ip: str | None, cluster_ips: Sequence[str]) -> Problem | None:
    """ValidateServiceClusterIPsRelatedFields, for a Service that is not headless."""
    if cluster_ip and cluster_ips[0] != cluster_ip:
        return Problem(("clusterIPs",), f"first value must match `clusterIP` ({cluster_ip}), got {cluster_ips[0]}")
    if not cluster_ip and cluster_ips:
        return Problem(("clusterIPs",), "must be empty when `clusterIP` is not specified")
    for i, family in enumerate(families):
        if family not in FAMILIES:
            return Problem(("ipFamilies", i), f"unsupported value {family!r}: supported values are IPv4, IPv6")
        if family in families[:i]:
            return Problem(("ipFamilies", i), f"duplicate value {family!r}")
    if len(families) > 2:
        return Problem(("ipFamilies",), "may only hold up to 2 values")  # two distinct families at most
    for i, ip in enumerate(cluster_ips):
        if family_of(ip) is None or "/" in ip:
            return Problem(("clusterIPs", i), f"must be a valid IP address, got {ip!r}")
    if len(cluster_ips) > 2:
        return Problem(("clusterIPs",), "may only hold up to 2 values")
    if len(cluster_ips) == 2 and family_of(cluster_ips[0]) == family_of(cluster_ips[1]):
        return Problem(("clusterIPs",), "may specify no more than one IP for each IP family")
    for i, (ip, family) in enumerate(zip(cluster_ips, families, strict=False)):
        if family_of(ip) != family:
            return Problem(("clusterIPs", i), f"expected an {family} value as indicated by `ipFamilies[{i}]`, got {ip}")
    return None


def slice_address_problem(address_type: str, address: str) -> str | None:
    """An EndpointSlice endpoint's address against the slice's addressType (validateEndpoints: an IPv4 slice holds
    IPv4 addresses, an IPv6 slice IPv6 ones; a slice has one addressType, so a dual-stack Service has a slice per
    family)."""
    family = family_of(address)
    if family is None or "/" in address:
        return f"must be a valid IP address, got {address!r}"
    if family != address_type:
        return f"{address} is an {family} address: a slice of addressType {address_type} holds {address_type} ones"
    return None
