"""Addresses and networks as Kubernetes parses them: the one parser every input goes through (scenario files,
`lab import`'s dumps, `lab replay`/`lab diff` flags and dumps, the Python API, a live lab's requests).

What it takes is what k8s.io/utils/net ParseIPSloppy and ParseCIDRSloppy take (Go 1.16's net.ParseIP and
net.ParseCIDR, which the API server validates every IP and CIDR field with; kubernetes/utils net/parse.go at
a3a77f330535a4bb0316111f23f659971a814a61): the characters of an address and nothing else. No space around it, no
zone (`fe80::1%eth0`: Python's ipaddress keeps the text after `%` in the address and in its str(), so a zone
could carry a newline, a quote or `$(...)` into the rule text a tool loads as root), no sign or other digits than
ASCII's. Two legacy forms Kubernetes still reads are read as it reads them (KEP-4858, "Updated IP/CIDR validity
criteria"): the API server refuses them in a new value behind the StrictIPCIDRValidation gate, alpha in 1.33, beta
and on in 1.36, GA in 1.38 (keps/sig-network/4858-ip-cidr-validation/kep.yaml, kubernetes/enhancements at
0333c7d324f52a63c89afb66c5e672550e25bbcf), but a value stored before keeps it (validation ratcheting), so a cluster
of any release can hold one, and kube-proxy parses it as ParseIPSloppy does. An IPv4 part with
leading zeros is decimal (`010.1.1.1` is 10.1.1.1, not octal), and an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`)
is the IPv4 address it maps (Go's To4). Every value comes back canonical (str of Python's address), so what
reaches rule text is only ever the canonical form kube-proxy itself writes (it renders parsed IPs, never the
text given).

Which addresses a field takes on top of that is Kubernetes' rule per field, in `host_problem`.
"""

from __future__ import annotations

import ipaddress
import re

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Go's parser reads up to these characters; anything else (space, %, a sign, a non-ASCII digit) is no address.
_IPV4 = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+", re.ASCII)
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:.]+", re.ASCII)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_EXAMPLES = "such as 192.168.56.10 or fd00:56::10"


class AddressError(ValueError):
    """Why a text is no address (or no network) of the kind asked for, in words."""


def _shown(text: str) -> str:
    """The value as an error quotes it: repr (a newline shows as \\n), at most 60 characters."""
    return repr(text) if len(text) <= 60 else repr(text[:57]) + "..."


def _decimal(digits: str) -> int | None:
    """ASCII digits as a number, leading zeros ignored (ParseIPSloppy's matchZeros); None past three digits."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 3 else None


def _sloppy_ipv4(text: str) -> str | None:
    """A dotted quad with leading zeros stripped, as ParseIPSloppy strips them before Go parses it."""
    if not _IPV4.fullmatch(text):
        return None
    parts = [_decimal(part) for part in text.split(".")]
    if any(part is None or part > 255 for part in parts):
        return None
    return ".".join(map(str, parts))


def parse_ip(text: str) -> IP:
    """The address `text` holds, as Kubernetes reads it; AddressError in words otherwise."""
    if not isinstance(text, str):
        raise AddressError(f"expected an IP address {_EXAMPLES}, got {type(text).__name__} {text!r}")
    if text != text.strip() and text.strip():
        raise AddressError(f"{_shown(text)} has space around the address: Kubernetes takes none")
    if "%" in text:
        raise AddressError(f"{_shown(text)} names a zone (after %): Kubernetes takes addresses without one")
    if (ipv4 := _sloppy_ipv4(text)) is not None:
        return ipaddress.IPv4Address(ipv4)
    if ":" in text and _IPV6_CHARS.fullmatch(text):
        head, _, tail = text.rpartition(":")
        try:
            ipv6 = ipaddress.IPv6Address(f"{head}:{_sloppy_ipv4(tail) or tail}")  # an IPv4 tail, zeros stripped too
        except ValueError:
            pass
        else:
            return ipv6.ipv4_mapped or ipv6
    raise AddressError(f"expected an IP address {_EXAMPLES}, got {_shown(text)}")


def parse_network(text: str, exact: bool = False) -> Network:
    """The network ADDRESS/PREFIX names, as ParseCIDRSloppy reads it: with host bits set it is the network they
    are in (its String() masks them), unless `exact` asks for a network written as such (10.244.1.0/24, not
    10.244.1.5/24), as the lab's own topology fields do."""
    example = "such as 10.244.1.0/24 or fd00:10:244:1::/64"
    if not isinstance(text, str):
        raise AddressError(f"expected a network {example}, got {type(text).__name__} {text!r}")
    address, slash, prefix = text.partition("/")
    bits = _decimal(prefix) if _DIGITS.fullmatch(prefix) else None
    if not slash or bits is None:
        raise AddressError(f"expected a network {example} (an address, / and a prefix length), got {_shown(text)}")
    try:
        ip = parse_ip(address)
    except AddressError as exc:
        raise AddressError(f"{_shown(text)}: {exc}") from None
    if ":" in address and ip.version == 4:
        raise AddressError(
            f"{_shown(text)} is an IPv4-mapped IPv6 network, which Kubernetes reads as IPv4 or IPv6 depending on the"
            " field: write the IPv4 network"
        )
    if bits > ip.max_prefixlen:
        raise AddressError(f"{_shown(text)}: an IPv{ip.version} prefix length is at most {ip.max_prefixlen}")
    network = ipaddress.ip_network((ip, bits), strict=False)
    if exact and network.network_address != ip:
        raise AddressError(f"expected a network {example}, got {_shown(text)} (host bits set: did you mean {network}?)")
    return network


def canonical_ip(text: str) -> str:
    return str(parse_ip(text))


def canonical_network(text: str, exact: bool = False) -> str:
    return str(parse_network(text, exact))


def family_of(text: str) -> str | None:
    """ "IPv4" or "IPv6" for an address or a network; None for neither."""
    try:
        ip = parse_network(text).network_address if "/" in text else parse_ip(text)
    except AddressError:
        return None
    return f"IPv{ip.version}"


# ValidateNonSpecialIP (kubernetes/kubernetes pkg/apis/core/validation/validation.go at
# a7264f95ffc8b56377da16e83461aa59467ebb3e): the addresses the API server refuses as an external IP or an
# endpoint's, by Go's net.IP predicates; each with its words, then the lab's.
_SPECIAL: tuple[tuple[str, str, str], ...] = (
    ("is_unspecified", "may not be unspecified", "the unspecified address"),
    ("is_loopback", "may not be in the loopback range (127.0.0.0/8, ::1/128)", "a loopback address"),
    ("is_link_local", "may not be in the link-local range (169.254.0.0/16, fe80::/10)", "a link-local address"),
)


def _link_local_multicast(ip: IP) -> bool:
    """Go's IsLinkLocalMulticast: 224.0.0.0/24, and IPv6 multicast of link-local scope (ffX2::/16)."""
    if ip.version == 4:
        return ip in ipaddress.IPv4Network("224.0.0.0/24")
    return ip.packed[0] == 0xFF and ip.packed[1] & 0x0F == 0x02


def host_problem(ip: IP, kubernetes_checks: bool) -> str | None:
    """Why `ip` cannot be the address of a host the lab builds or sends to (a node, a pod, an endpoint, an
    external IP, a load balancer): the API server's own refusal where it checks the field (`kubernetes_checks`:
    externalIPs, EndpointSlice addresses), else the lab's. A multicast or broadcast address is refused either
    way: the API server takes one as an external IP (only link-local multicast is special to it), but no host
    answers unicast traffic at one."""
    for predicate, kubernetes_words, noun in _SPECIAL:
        if getattr(ip, predicate):
            if kubernetes_checks:
                return f"{kubernetes_words} ({ip})" if predicate == "is_unspecified" else kubernetes_words
            return f"{ip} is {noun}: the lab cannot give it to a host"
    if _link_local_multicast(ip) and kubernetes_checks:
        return "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
    if ip.is_multicast:
        return f"{ip} is a multicast address: the lab models unicast hosts only"
    if ip == ipaddress.IPv4Address("255.255.255.255"):
        return f"{ip} is the limited broadcast address: the lab models unicast hosts only"
    return None
