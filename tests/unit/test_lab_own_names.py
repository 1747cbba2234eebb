"""The lab's own parts are named as no actor of a scenario can be (docs/scenarios.md, "Names"): its namespaces
(the fabric, the stand-ins) and the ports it hangs actors on (to-NAME beside br0, lan0, lo, a fallback tunnel
device). Each collision built half a lab before (FileExistsError, NetlinkError: File exists)."""

from __future__ import annotations

import pytest

from lab.describe.names import DNS1123_LABEL, DNS1123_SUBDOMAIN, refusal
from lab.realize.build import FABRIC, LAN_BRIDGE
from lab.realize.kernel_names import bridge_port, netns_part
from lab.realize.standins import STAND_INS

# Devices a namespace holding a bridge of the lab's has beside its ports: its own, and the fallback tunnel devices
# the kernel makes in every new namespace when their module is loaded (torvalds/linux net/ipv4/ipip.c "tunl0",
# net/ipv6/sit.c "sit0", net/ipv4/ip_gre.c "gre0", "gretap0", "erspan0", net/ipv6/ip6_tunnel.c "ip6tnl0",
# net/ipv6/ip6_gre.c "ip6gre0").
DEVICES = ("lo", "br0", LAN_BRIDGE, "eth0", "tunl0", "sit0", "gre0", "gretap0", "erspan0", "ip6tnl0", "ip6gre0")


@pytest.mark.parametrize("own", [FABRIC, STAND_INS])
def test_the_labs_own_namespaces_are_named_as_no_actor_can_be(own):
    """A node, an external host or a load balancer (DNS-1123 labels) or a pod (a DNS-1123 subdomain, or
    NAMESPACE_NAME outside default) named as one of the lab's own would share its namespace."""
    assert refusal(DNS1123_LABEL, "a node's name", own) is not None
    assert refusal(DNS1123_SUBDOMAIN, "a pod's name", own) is not None
    assert not netns_part(own).split("_")[0]  # nothing before the mark: no pod's namespace


@pytest.mark.parametrize("device", DEVICES)
def test_an_actor_named_as_a_device_gets_a_port_of_its_own(device):
    """A node named br0 (or lo) on the underlay, a host named lan0 (or eth0) behind a router."""
    assert bridge_port(device) not in DEVICES
    assert bridge_port(device) == f"to-{device}"
