"""ipvs graceful termination (pkg/proxy/ipvs/graceful_termination.go): which real server a sync leaves at
weight 0 and which it deletes.

A TCP real server whose endpoint left is set to weight 0 by the sync (sync_lines in ipvs.py) and kept while it
still has connections; it is deleted once it has no active and no inactive connection
(ActiveConn + InActConn and utilipvs.IsRsGracefulTerminationNeeded, true for neither UDP nor SCTP: read in
the klog-era manager; that it holds for every release the lab reproduces in ipvs mode, 1.19 on, is inferred
from the era, the 2018 manager counted ActiveConn alone). kube-proxy retries the deletion every minute
(rsCheckDeleteInterval); the lab checks at each later sync. UDP and SCTP real servers are deleted at once by
the sync itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.render.kubeproxy.addresses import host_port
from lab.render.kubeproxy.ipvs import IpvsRules, ipvsadm_flag
from lab.render.kubeproxy.kernel_state import RealServerState


@dataclass(frozen=True)
class RealServerDecision:
    """What the graceful termination check does with one real server left at weight 0."""

    server: RealServerState
    delete: bool

    @property
    def ipvsadm_args(self) -> tuple[str, ...]:
        """`ipvsadm -d -t VIP:PORT -r RS:PORT`: the deletion, for install to run."""
        return ("-d", ipvsadm_flag(self.server.protocol), self.server.service, "-r", self.server.address)

    @property
    def reason(self) -> str:
        where = f"real server {self.server.address} of {self.server.service}"
        if self.delete:
            return f"ipvs graceful termination: {where} deleted, no connection left"
        return (
            f"ipvs graceful termination: {where} kept at weight 0 while it has connections "
            f"({self.server.active} active, {self.server.inactive} inactive)"
        )


# (protocol, "VIP:port") → {real server "IP:port": weight}
Weights = dict[tuple[str, str], dict[str, int]]


def _weights(rules: IpvsRules) -> Weights:
    """(protocol, "VIP:port") → {real server "IP:port": weight}, as render wrote them."""
    return {
        (vs.protocol, host_port(vs.address, vs.port)): {rs.text: rs.weight for rs in vs.real_servers}
        for vs in rules.virtual_servers
    }


def weight_after(server: RealServerState, before: Weights, after: Weights) -> int | None:
    """The weight a real server the kernel has is left with once the sync from the rules weighed `before` to those
    weighed `after` is written (None: the sync deletes it, with its virtual server or, UDP and SCTP, at once)."""
    service = (server.protocol, server.service)
    if service in after and server.address in after[service]:
        return after[service][server.address]
    if service in before and service not in after:
        return None
    if service in before and server.address in before[service]:
        return 0 if server.protocol == "TCP" else None
    return server.weight  # not render's: kept at weight 0 by an earlier sync, or none of kube-proxy's


def graceful_terminations(
    servers: tuple[RealServerState, ...], old: IpvsRules, new: IpvsRules
) -> tuple[RealServerDecision, ...]:
    """The check after a sync: every real server at weight 0 once the sync is written, deleted if it has no
    connection left, else kept, in `ipvsadm -Ln`'s order. Each set of rules is weighed once: weighed per real
    server, the check grew with the square of the Services (a one-endpoint change of 2 000 took a minute)."""
    before, after = _weights(old), _weights(new)
    return tuple(
        RealServerDecision(server, delete=server.active == 0 and server.inactive == 0)
        for server in servers
        if weight_after(server, before, after) == 0
    )
