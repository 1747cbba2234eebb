"""The cluster section: the kube-proxy release it runs, what that release decides here, and its three networks.

Which releases exist is describe's to check; what a release does is render's (lab/render/kubeproxy/versions.py).
"""

from __future__ import annotations

import itertools

from lab.describe import schema
from lab.describe.families import family_of, overlap, split
from lab.describe.releases import check_node_port_addresses, check_option, check_version
from lab.describe.resolve.checks import hosts
from lab.describe.resolve.iptables_wrapper import WRAPPER, Choice, Unknowable, choose_backend
from lab.describe.resolve.node_tables import BackendTables, nft_tables, restore_tables
from lab.describe.resolve.restore_text import restore_text_problem
from lab.describe.topology import ClusterSpec
from lab.describe.yamlsrc import Source


def resolve_cluster(src: Source, c: schema.Cluster) -> ClusterSpec:
    """A release kube-proxy's rules are known for, and networks that do not overlap; the gateway is the underlay's
    first address."""
    if problem := check_version(c.kube_version):
        raise src.error(("cluster", "kubeVersion"), problem)
    nets = {"clusterCIDR": split(c.cluster_cidr), "serviceCIDR": split(c.service_cidr), "underlay": split(c.underlay)}
    families = [family_of(n) for n in nets["clusterCIDR"]]
    wanted = ", ".join(map(str, families))
    for name, given in nets.items():
        if [family_of(n) for n in given] != families:
            raise src.error(
                ("cluster", name),
                f"{','.join(given)} does not give the families of clusterCIDR {c.cluster_cidr} ({wanted}) in that"
                " order: each of clusterCIDR, serviceCIDR and underlay gives one network per family of the cluster,"
                " the primary family first",
            )
    for (a, na), (b, nb) in itertools.combinations(nets.items(), 2):
        for x, y in itertools.product(na, nb):
            if overlap(x, y):
                raise src.error(("cluster", b), f"{y} overlaps {a} {x}; the three networks must be disjoint")
    if c.tunnel_mtu is not None and c.cni != "routed-tunnel":
        raise src.error(
            ("cluster", "tunnelMTU"), f"tunnelMTU is the tunnel device's: it goes with cni: routed-tunnel, not {c.cni}"
        )
    if c.cni == "flannel" and c.tunnel != "auto":
        raise src.error(
            ("cluster", "tunnel"),
            f"tunnel {c.tunnel} is routed-tunnel's device: flannel's is its vxlan backend's flannel.1, always",
        )
    if c.cni == "flannel" and c.hairpin_mode == "promiscuous-bridge":
        raise src.error(
            ("cluster", "hairpinMode"),
            "promiscuous-bridge is kubelet's kubenet mode; flannel's CNI config sets the bridge plugin's hairpinMode"
            " (true by default: hairpin-veth; none where it is false)",
        )
    if c.nat_outgoing is not None and c.cni != "routed-tunnel":
        raise src.error(
            ("cluster", "natOutgoing"), f"natOutgoing is Calico's pool's: it goes with cni: routed-tunnel, not {c.cni}"
        )
    ct = c.conntrack
    for name, value in (
        ("tcpBeLiberal", ct.tcp_be_liberal),
        ("udpTimeout", ct.udp_timeout),
        ("udpStreamTimeout", ct.udp_stream_timeout),
    ):
        if value and (problem := check_option(c.kube_version, ("conntrack", name))):
            raise src.error(("cluster", "conntrack", name), problem)
    if not c.iptables.localhost_nodeports and (
        problem := check_option(c.kube_version, ("iptables", "localhostNodePorts"))
    ):
        raise src.error(("cluster", "iptables", "localhostNodePorts"), problem)
    addresses = c.node_port_addresses
    if problem := check_node_port_addresses(c.kube_version, addresses, schema.NODE_PORT_KEYWORDS):
        raise src.error(("cluster", "nodePortAddresses"), problem)
    if problem := restore_text_problem(c.tools.host.iptables_rules):
        raise src.error(("cluster", "tools", "host", "iptablesRules"), f"not iptables-restore's input: {problem}")
    backend = _kube_proxy_backend(src, c)
    tools = _tools(src, c, backend.backend)
    (cluster_cidr, *cluster2), (service_cidr, *service2), (underlay, *underlay2) = nets.values()
    return ClusterSpec(
        proxy_mode=c.proxy_mode,
        kube_version=c.kube_version,
        iptables_backend=backend.backend,
        cluster_cidr=cluster_cidr,
        kube_proxy_cluster_cidr=c.kube_proxy_cluster_cidr,
        service_cidr=service_cidr,
        hairpin_mode=c.hairpin_mode,
        underlay=underlay,
        gateway_ip=next(hosts(underlay)),
        br_netfilter=c.br_netfilter,
        cni=c.cni,
        tunnel=c.tunnel,
        tunnel_mtu=c.tunnel_mtu or 0,
        nat_outgoing=c.nat_outgoing is not False,
        ipvs_bind_lb_ips=c.ipvs_bind_load_balancer_ips,
        tcp_be_liberal=ct.tcp_be_liberal,
        udp_timeout=ct.udp_timeout or 0,
        udp_stream_timeout=ct.udp_stream_timeout or 0,
        masquerade_all=c.masquerade_all,
        masquerade_bit=c.masquerade_bit,
        node_port_addresses=tuple(addresses),
        iptables_localhost_nodeports=c.iptables.localhost_nodeports,
        feature_gates=tuple(sorted(c.feature_gates.items())),
        ipvs_scheduler=c.ipvs.scheduler,
        ipvs_strict_arp=c.ipvs.strict_arp,
        secondary_cluster_cidr="".join(cluster2),
        secondary_service_cidr="".join(service2),
        secondary_underlay="".join(underlay2),
        secondary_gateway_ip="".join(next(hosts(u)) for u in underlay2),
        tools=tools,
        host_nftables=c.tools.host.nftables,
        host_iptables_backend=_host_backend(c, backend.backend),
        host_iptables_rules=c.tools.host.iptables_rules,
        iptables_backend_why=backend.why,
    )


def _tools(src: Source, c: schema.Cluster, kube_proxy_backend: str) -> tuple[tuple[str, str, str], ...]:
    """(role, tool, release) of each writer given a Debian release's tool, its iptables named by the backend the
    writer writes in; kube-proxy runs nft only in nftables mode, iptables only in the other two."""
    kube_proxy, host = c.tools.kube_proxy, c.tools.host
    if kube_proxy.nft and c.proxy_mode != "nftables":
        raise src.error(
            ("cluster", "tools", "kubeProxy", "nft"),
            f"kube-proxy runs nft only in proxyMode nftables, not {c.proxy_mode}",
        )
    if kube_proxy.iptables and c.proxy_mode == "nftables":
        raise src.error(
            ("cluster", "tools", "kubeProxy", "iptables"),
            "kube-proxy runs iptables only in proxyMode iptables or ipvs, not nftables",
        )
    backends = {"kubeProxy": kube_proxy_backend, "host": _host_backend(c, kube_proxy_backend)}
    given = (("kubeProxy", kube_proxy), ("host", host))
    return tuple(
        (role, tool, release)
        for role, releases in given
        for tool, release in (("nft", releases.nft), (f"iptables-{backends[role]}", releases.iptables))
        if release
    )


def _host_backend(c: schema.Cluster, kube_proxy_backend: str) -> str:
    """The iptables backend the node's other writers write in: their own where given, else kube-proxy's."""
    return c.tools.host.iptables_backend or kube_proxy_backend


def _kube_proxy_backend(src: Source, c: schema.Cluster) -> Choice:
    """The backend kube-proxy writes in: as written, or (wrapper) as its image's iptables-wrapper chooses from the
    host's rules, which stand before kube-proxy starts; the host's backend is then theirs, or the chosen one where
    they write none."""
    if c.iptables_backend != WRAPPER:
        return Choice(c.iptables_backend, "")
    host = c.tools.host
    if host.iptables_rules and not host.iptables_backend:
        raise src.error(
            ("cluster", "tools", "host", "iptablesBackend"),
            "with iptablesBackend wrapper, say which backend the host's iptablesRules are in (nft or legacy): the"
            " wrapper chooses kube-proxy's from them",
        )
    restored = restore_tables(host.iptables_rules)
    empty = BackendTables()
    legacy, nft = (restored, empty) if host.iptables_backend == "legacy" else (empty, restored)
    try:
        return choose_backend(c.kube_version, legacy, _with_nft_script(nft, nft_tables(host.nftables)))
    except Unknowable as exc:
        raise src.error(exc.field, str(exc)) from None


def _with_nft_script(restored: BackendTables, script: BackendTables) -> BackendTables:
    """iptables-nft's tables as iptables-nft-save prints them: the host's iptables rules there and the tables of
    its nft script."""
    return BackendTables(
        restored.chains | script.chains,
        restored.rules + script.rules,
        restored.unread or script.unread,
        restored.uncounted or script.uncounted,
        script.mangle_unsure,
    )
