"""kube-proxy's conntrack cleanup after a sync, per release: which UDP entries it deletes on a node.

TCP entries are never deleted (kube-proxy leaves established flows to drain, #101607); only UDP flows are,
because a UDP client that keeps its 5-tuple refreshes the entry forever and keeps the NAT decision of its
first packet. Two shapes, one per era (Release.conntrack_reconciler):

- event-driven, up to 1.31 (pkg/proxy/conntrack/conntrack.go and cleanup.go of that era, run with the
  `conntrack` binary): after the rules are written, for each UDP endpoint that left a Service port
  (DeletedUDPEndpoints) `conntrack -D --orig-dst <frontend> --dst-nat <endpoint> -p udp` for the ClusterIP,
  every externalIP and LoadBalancer IP (#104009), plus `conntrack -D -p udp --dport <nodePort> --dst-nat
  <endpoint>`; for each UDP Service port going from no endpoints to some (NewlyActiveUDPServices, #48370)
  `conntrack -D --orig-dst <frontend> -p udp` and `conntrack -D -p udp --dport <nodePort>`; for each deleted
  UDP ClusterIP `conntrack -D --orig-dst <clusterIP> -p udp`. A restart sees every Service go from nothing
  to its endpoints and flushes them all (#122740).
- the reconciler, 1.32 on (#127318, netlink since #126847): on every sync it lists the UDP entries and
  deletes each one whose original destination is a Service frontend (ClusterIP:port, externalIP:port,
  LoadBalancer IP:port, #130484; or a NodePort) while its reply source is not a serving endpoint of that
  Service. A Service without serving endpoints is skipped (#139628: the scale-to-zero blackhole, fixed by
  #139629 in 1.37), and a deleted Service is no longer known, so its entries stay while its flows go on
  (#141371: from 1.38 the Service ports deleted since the last sync are reconciled against an empty set, as
  the frontends of no live Service).

kube-proxy 1.32+ talks netlink; the lab deletes the same entries with the `conntrack` tool's equivalent
filter (--orig-dst, --orig-port-dst, --reply-src), which the kernel applies alike.

Each family's proxier cleans its own family's entries: the event-driven era's IPv6 commands end with `-f ipv6`
(parametersWithFamily in pkg/proxy/conntrack/conntrack.go at
kubernetes/kubernetes@2189d915782d5de2842c516c9381f303acbf610c: without it the tool deletes IPv4 entries only,
which matters for `--dport` alone), and the reconciler lists and deletes per family (ClearEntries(ipFamily, ...)
in that file at kubernetes/kubernetes@5201a68319e0b79ec87933d0199a13259e25a94d); a dual-stack node's cleanup is
both proxiers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from lab.describe.families import Family, family_of
from lab.render.kubeproxy.addresses import host_port, parse_ip
from lab.render.kubeproxy.kernel_state import ConntrackEntry
from lab.render.kubeproxy.service import Endpoint, ServicePort
from lab.render.kubeproxy.versions import Release


@dataclass(frozen=True)
class Frontend:
    """Where a UDP flow to a Service was addressed: an IP and port, or a NodePort on any address."""

    ip: str | None
    port: int

    def __str__(self) -> str:
        return host_port(self.ip, self.port) if self.ip else f"NodePort {self.port}"


@dataclass(frozen=True)
class Cleanup:
    """What one node's kube-proxy does to conntrack after a sync: `conntrack` commands to run as they are, each
    with the decision that asked for it (event-driven era), or, for the reconciler, each frontend with the
    endpoint IPs that may stay behind it."""

    deletes: tuple[tuple[tuple[str, ...], str], ...] = ()
    reconcile: tuple[tuple[Frontend, frozenset[str]], ...] = ()
    why: tuple[str, ...] = ()  # one line per decision, in kube-proxy's words where it logs them

    @property
    def empty(self) -> bool:
        return not (self.deletes or self.reconcile)

    @property
    def commands(self) -> tuple[tuple[str, ...], ...]:
        """The event-driven era's `conntrack` arguments, in order."""
        return tuple(args for args, _ in self.deletes)


@dataclass(frozen=True)
class ConntrackDeletion:
    """One `conntrack` deletion a sync runs: its arguments, why kube-proxy runs it, and what the lab says once
    it ran (the command, or the entry as `conntrack -L` printed it)."""

    args: tuple[str, ...]
    reason: str
    done: str


def _udp(ports: Sequence[ServicePort]) -> dict[str, ServicePort]:
    return {f"{p.port_name_string}:{p.port}": p for p in ports if p.protocol == "UDP" and p.cluster_ip}


def _ips(port: ServicePort) -> list[str]:
    """ClusterIP, externalIPs and LoadBalancer IPs, once each."""
    return list(dict.fromkeys(ip for ip in (port.cluster_ip, *port.external_ips, *port.load_balancer_ips) if ip))


def _counted(ep: Endpoint, release: Release) -> bool:
    """An endpoint the change tracker counts as present (#106163 made it readiness-aware)."""
    return ep.ready or not release.udp_cleanup_readiness_aware


def cleanup(
    old: Sequence[ServicePort],
    new: Sequence[ServicePort],
    release: Release,
    *,
    restart: bool = False,
    family: Family = "IPv4",
) -> Cleanup:
    """The conntrack cleanup of the proxier of `family` after a sync that went from `old` to `new` (its family's
    Service ports; restart: a new kube-proxy process, whose first sync knows no `old`)."""
    old, new = _of_family(old, family), _of_family(new, family)
    if release.conntrack_reconciler:
        deleted = _deleted(old, new) if release.reconciler_cleans_deleted_services and not restart else []
        return _reconcile(new, deleted, release)
    events = _events({} if restart else _udp(old), _udp(new), release)
    if family == "IPv4":
        return events
    return Cleanup(deletes=tuple(((*args, "-f", "ipv6"), why) for args, why in events.deletes), why=events.why)


def _of_family(ports: Sequence[ServicePort], family: Family) -> list[ServicePort]:
    """The ports as the family's proxier knows them: endpoints (its EndpointSlices), externalIPs and LoadBalancer
    IPs of its family only (a Service port carries every family's, as render's proxiers take theirs)."""

    def mine(ips: Sequence[str]) -> tuple[str, ...]:
        return tuple(ip for ip in ips if parse_ip(ip, family) is not None)

    return [
        replace(
            port,
            endpoints=tuple(ep for ep in port.endpoints if parse_ip(ep.ip, family) is not None),
            external_ips=mine(port.external_ips),
            load_balancer_ips=mine(port.load_balancer_ips),
        )
        for port in ports
    ]


def combined(cleanups: Sequence[Cleanup]) -> Cleanup:
    """A dual-stack node's cleanup: each family's proxier's, the primary's first."""
    return Cleanup(
        deletes=tuple(d for c in cleanups for d in c.deletes),
        reconcile=tuple(r for c in cleanups for r in c.reconcile),
        why=tuple(w for c in cleanups for w in c.why),
    )


def _events(old: dict[str, ServicePort], new: dict[str, ServicePort], release: Release) -> Cleanup:
    deletes: dict[tuple[str, ...], str] = {}  # each command, with the first decision that asked for it
    why: list[str] = []

    def decide(reason: str, commands: list[tuple[str, ...]]) -> None:
        why.append(reason)
        for args in commands:
            deletes.setdefault(args, reason)

    for key, port in new.items():
        before = {ep.ip for ep in old[key].endpoints if _counted(ep, release)} if key in old else set()
        after = {ep.ip for ep in port.endpoints if _counted(ep, release)}
        if after and not before:
            commands = [("-D", "--orig-dst", ip, "-p", "udp") for ip in _ips(port)]
            if port.node_port:
                commands.append(("-D", "-p", "udp", "--dport", str(port.node_port)))
            decide(f"Newly-active UDP service may have stale conntrack entries: {port.port_name_string}", commands)
        for gone in sorted(before - after):
            commands = [("-D", "--orig-dst", ip, "--dst-nat", gone, "-p", "udp") for ip in _ips(port)]
            if port.node_port:
                commands.append(("-D", "-p", "udp", "--dport", str(port.node_port), "--dst-nat", gone))
            decide(f"Deleted endpoint may have stale conntrack entries: {port.port_name_string} {gone}", commands)
    for key, port in old.items():
        if key not in new and port.cluster_ip:
            decide(
                f"Deleting conntrack stale entries for deleted UDP service {port.port_name_string}",
                [("-D", "--orig-dst", port.cluster_ip, "-p", "udp")],
            )
    return Cleanup(deletes=tuple(deletes.items()), why=tuple(why))


def _deleted(old: Sequence[ServicePort], new: Sequence[ServicePort]) -> list[ServicePort]:
    """The UDP Service ports gone since the last sync: ServicePortMap.Update's DeletedServices, keyed by
    ServicePortName (namespace, name, port name and protocol: a port whose number changed is updated, not
    deleted), so a deleted Service's ports and a port a Service no longer has. That is #141371 as its author's fork
    has it; another fork (weizhoublue/kubernetes@1c155daef7e728cf8a4988bbf4947abd5e0a9adb) also lists a port whose
    number, LoadBalancer IPs or external IPs changed, in no change found merged: to check again at 1.38's release."""
    live = {(port.port_name_string, port.protocol) for port in new}
    return [port for port in _udp(old).values() if (port.port_name_string, port.protocol) not in live]


def _reconcile(new: Sequence[ServicePort], deleted: Sequence[ServicePort], release: Release) -> Cleanup:
    frontends: dict[Frontend, set[str]] = {}
    why: list[str] = []
    for port in _udp(new).values():
        serving = {ep.ip for ep in port.endpoints if ep.serving}
        if not serving and not release.reconciler_cleans_scaled_to_zero:
            why.append(f"{port.port_name_string} has no serving endpoint: its entries are left alone (#139628)")
            continue
        if not serving:
            nodeport = ", those to its NodePort are left alone" if port.node_port else ""
            why.append(
                f"{port.port_name_string} has no serving endpoint: its Service IPs' entries go (#139629){nodeport}"
            )
        for ip in _ips(port):
            frontends.setdefault(Frontend(ip, port.port), set()).update(serving)
        # A NodePort is matched by port alone, so with nothing serving it would delete every UDP flow to that
        # port number, kube-proxy's or not: 1.37 still skips it (addService in pkg/proxy/conntrack/cleanup.go at
        # kiarashazarnia/kubernetes@4426ed5de01a08d75530f9e4c4814f6a28d806eb).
        if port.node_port and serving:
            frontends.setdefault(Frontend(None, port.node_port), set()).update(serving)
    # Deleted ports after the live ones here, as kube-proxy reconciles them first and lets a live Service's
    # endpoints overwrite a frontend they share (CleanStaleEntries in pkg/proxy/conntrack/cleanup.go at
    # kiarashazarnia/kubernetes@4426ed5de01a08d75530f9e4c4814f6a28d806eb); their NodePorts are skipped, as any
    # port without serving endpoints.
    for port in deleted:
        gone = [Frontend(ip, port.port) for ip in _ips(port) if Frontend(ip, port.port) not in frontends]
        if gone:
            why.append(f"{port.port_name_string} was deleted: its Service IPs' entries go (#141371)")
        for frontend in gone:
            frontends[frontend] = set()
    reconcile = tuple((frontend, frozenset(ips)) for frontend, ips in frontends.items())
    return Cleanup(reconcile=reconcile, why=tuple(why))


def deletions(plan: Cleanup, entries: Sequence[ConntrackEntry]) -> tuple[ConntrackDeletion, ...]:
    """The `conntrack` deletions of a sync: the event-driven era's commands, then, for the reconciler, one per UDP
    entry (of those install listed) addressed to a frontend and answered by no serving endpoint of it."""
    done = [ConntrackDeletion(args, reason, f"ran conntrack {' '.join(args)}") for args, reason in plan.deletes]
    wanted = dict(plan.reconcile)
    for entry in entries:
        for frontend in (Frontend(entry.orig_dst, entry.orig_dport), Frontend(None, entry.orig_dport)):
            if frontend in wanted and entry.reply_src not in wanted[frontend]:
                done.append(_stale(entry, frontend, by_ip=Frontend(entry.orig_dst, entry.orig_dport) in wanted))
                break
    return tuple(done)


def _stale(entry: ConntrackEntry, frontend: Frontend, by_ip: bool) -> ConntrackDeletion:
    """The reconciler's deletion of one entry, by the conntrack tool's filter equivalent to kube-proxy's netlink
    one: the original destination (its IP where that is a frontend; a NodePort is matched by port alone) and
    the reply source."""
    dst = ("--orig-dst", entry.orig_dst) if by_ip else ()
    family = ("-f", "ipv6") if family_of(entry.orig_dst) == "IPv6" else ()  # the IPv6 proxier's own family's
    args = ("-D", "-p", "udp", *dst, "--orig-port-dst", str(entry.orig_dport), "--reply-src", entry.reply_src, *family)
    reason = f"stale UDP entry to {frontend}: {entry.reply_src} is no serving endpoint of it"
    return ConntrackDeletion(args, reason, f"deleted {entry.text}")


def start_sysctls(tcp_be_liberal: bool, udp_timeout: int, udp_stream_timeout: int) -> tuple[tuple[str, str], ...]:
    """The netfilter sysctls kube-proxy writes on start, before it creates its proxier (cmd/kube-proxy/app
    server_linux.go setupConntrack, then pkg/proxy/conntrack/sysctls.go): the established and close-wait TCP
    timeouts of its defaults (24 h, 1 h), and tcp_be_liberal and the UDP timeouts when configured (#120354,
    1.29). nf_conntrack_max is left out in every release: a network namespace other than the host's cannot set it
    (so are 1.36's cap of 1 Mi on it and 1.38's writing it only to raise it, #142035)."""
    sysctls = [
        ("net.netfilter.nf_conntrack_tcp_timeout_established", "86400"),
        ("net.netfilter.nf_conntrack_tcp_timeout_close_wait", "3600"),
    ]
    if tcp_be_liberal:
        sysctls.append(("net.netfilter.nf_conntrack_tcp_be_liberal", "1"))
    if udp_timeout:
        sysctls.append(("net.netfilter.nf_conntrack_udp_timeout", str(udp_timeout)))
    if udp_stream_timeout:
        sysctls.append(("net.netfilter.nf_conntrack_udp_timeout_stream", str(udp_stream_timeout)))
    return tuple(sysctls)
