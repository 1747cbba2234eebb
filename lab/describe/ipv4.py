"""Address fields of a scenario file the lab models for IPv4 only (load balancers, egress gateways, routers' LANs
and routes), parsed as every address is (lab/describe/ip.py), and refused in words when of the other family."""

from __future__ import annotations

from lab.describe import ip
from lab.describe.families import host_address


def address(value: str) -> str:
    """A host's IPv4 address, canonical."""
    text = host_address(value)
    if ip.parse_ip(text).version != 4:
        raise ValueError(f"expected an IPv4 address (the lab models this for IPv4 only), got {value!r}")
    return text


def network(value: str) -> str:
    """An IPv4 network written as such: 10.244.1.0/24, not 10.244.1.5/24; canonical."""
    net = ip.parse_network(value, exact=True)
    if net.version != 4:
        raise ValueError(
            f"expected an IPv4 network such as 10.244.1.0/24 (the lab models this for IPv4 only), got {value!r}"
        )
    return str(net)
