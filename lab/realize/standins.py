"""A sliced cluster's stand-in nodes: one namespace on the underlay holding every stand-in's node IP and, as
local routes, its podCIDR, so that a connection to a stand-in's pod is routed as the real cluster routes it (a
real node's route to that podCIDR via the stand-in's node IP) and answered from the pod's own address by the
probe session's backends listening there. No stand-in runs kube-proxy or any rule: a stand-in is never a node a
probe enters, starts from or is answered by as a node (describe refuses such probes)."""

from __future__ import annotations

from ipaddress import ip_network

from lab.describe.topology import NodeSpec, Topology
from lab.realize.links import NetBuilder

# The actor (its namespace) holding every stand-in node's addresses. Its leading '_' is in no name a scenario gives
# nor in any namespace name lab.realize.kernel_names makes of one (a pod's NAMESPACE_NAME has its namespace before
# the '_'): a node, an external host or a pod named "stand-ins" keeps its own namespace beside it.
STAND_INS = "_stand-ins"
RT_TABLE_LOCAL = 255  # linux/rtnetlink.h: where `ip route add local` puts a route
RT_SCOPE_HOST = 254  # linux/rtnetlink.h: a local route's scope, as the kernel gives its own


def fill_stand_ins(builder: NetBuilder, topo: Topology) -> None:
    """The stand-in namespace, opened and attached to the underlay with the first stand-in's node IP: every other
    stand-in's node IP on its eth0, each podCIDR a local route (any address of it is the namespace's own, AnyIP,
    as a pod there would own its one), and a route to each built node's podCIDR via that node, as the other nodes
    have."""
    eth0 = builder.index(STAND_INS, "eth0")
    prefixlen = ip_network(topo.cluster.underlay).prefixlen
    for node in topo.stand_ins[1:]:
        builder.address(STAND_INS, eth0, node.ip, prefixlen)
    ipr, lo = builder.ipr[STAND_INS], builder.index(STAND_INS, "lo")
    for node in topo.stand_ins:
        ipr.route("add", dst=node.pod_cidr, type="local", table=RT_TABLE_LOCAL, oif=lo, scope=RT_SCOPE_HOST)
    routes = builder.batch(STAND_INS)
    for node in topo.nodes:
        routes.route(node.pod_cidr, gateway=node.ip)
    routes.commit()


def routed_blocks(topo: Topology) -> list[NodeSpec]:
    """Every node whose pod block the others route to its node IP: the built ones and the stand-ins."""
    return [*topo.nodes, *topo.stand_ins]
