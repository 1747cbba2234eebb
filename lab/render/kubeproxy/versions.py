"""The one version table: what kube-proxy of each release does differently, every switch a named property of
`Release` that cites the change behind it. The renderers, the health check server and the Service view ask
these properties; none of them compares version numbers itself.

Sources (pinned in the mode modules' docstrings and docs/kubeproxy-versions.md): S-commits are the kube-proxy
sources vendored by openshift/sdn, one per minor (S1.20 = 64fa36f6 ... S1.30 = 70cefcdd); "#N" is a pull
request of kubernetes/kubernetes. Where a release is inferred rather than read, the property says so.

The iptables layout changed in steps; each step is an "era" (docs/kubeproxy-versions.md):

  A  1.19-1.21  KUBE-XLB chains; masquerade rules in KUBE-SERVICES / KUBE-NODEPORTS; KUBE-FW for
                every LoadBalancer IP; KUBE-MARK-DROP (filled by kubelet)
  B  1.22-1.23  masquerade rules moved into KUBE-SVC-* (#96959)
  C  1.24       KUBE-EXT / KUBE-SVL replace KUBE-XLB (#109060, #106497)
  D  1.25-1.26  no KUBE-MARK-DROP: filter DROP rules and KUBE-PROXY-FIREWALL (#110289, #110290)
  E  1.27-      kube-proxy writes its own KUBE-FIREWALL rule (#114470)
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.describe.releases import IPTABLES_VERSIONS, NEWEST_MINOR, check_version, gate_default

# (era, first minor, last minor)
ERAS: tuple[tuple[str, int, int], ...] = (
    ("A", 19, 21),
    ("B", 22, 23),
    ("C", 24, 24),
    ("D", 25, 26),
    ("E", 27, NEWEST_MINOR),
)


def minor_of(version: str) -> int:
    """19 for "1.19"; ValueError for anything that is not a supported "1.N"."""
    if version not in IPTABLES_VERSIONS:
        raise ValueError(check_version(version))
    return int(version.split(".")[1])


def era_of(version: str) -> str:
    """The iptables layout era ("A".."E") that kube-proxy of this version writes."""
    minor = minor_of(version)
    return next(name for name, first, last in ERAS if first <= minor <= last)


def era_versions(era: str) -> tuple[str, ...]:
    """The supported versions of one era, oldest first."""
    first, last = next((first, last) for name, first, last in ERAS if name == era)
    return tuple(f"1.{minor}" for minor in range(first, last + 1))


@dataclass(frozen=True)
class Release:
    """kube-proxy (and the kubelet beside it) of one Kubernetes minor release."""

    minor: int

    @classmethod
    def of(cls, version: str) -> Release:
        """The release of "1.N"; ValueError naming the supported ones for anything else."""
        return cls(minor_of(version))

    @property
    def version(self) -> str:
        return f"1.{self.minor}"

    @property
    def era(self) -> str:
        return era_of(self.version)

    # --- which endpoints a Service uses (every mode) --------------------------------------------------

    @property
    def endpoint_selection(self) -> str:
        """How syncProxyRules picks endpoints:
        "ready"       1.19-1.21: ready endpoints only (ServiceInternalTrafficPolicy alpha, off; S1.20, S1.21);
        "filtered"    1.22-1.23: FilterEndpoints, internalTrafficPolicy=Local (beta) narrows the whole Service
                      to local endpoints unless externalTrafficPolicy is Local (pkg/proxy/topology.go, S1.22);
        "categorized" 1.24-: CategorizeEndpoints, a Cluster and a Local set chosen apart (#106497)."""
        if self.minor <= 21:
            return "ready"
        return "filtered" if self.minor <= 23 else "categorized"

    @property
    def topology_hints(self) -> str:
        """When CategorizeEndpoints follows the endpoints' zone hints (pkg/proxy/topology.go):
        "off"         1.19-1.23: the TopologyAwareHints gate is off by default (alpha 1.21, beta but off in 1.23;
                      kube_features.go at S1.21-S1.23);
        "annotation"  1.24-1.30: on (beta, on by default from S1.24), for a Service whose topology annotation
                      enables it (canUseTopology at S1.24-S1.30);
        "always"      1.31-: ServiceTrafficDistribution is on (beta 1.31, GA 1.33; kube_features.go at
                      kubernetes/kubernetes@b0b89d3b) and the annotation is no longer asked (canUseTopology at
                      danwinship/kubernetes@7dfae2cf; topologyModeFromHints at kubernetes/kubernetes@008b3652)."""
        if self.minor <= 23:
            return "off"
        return "annotation" if self.minor <= 30 else "always"

    @property
    def topology_mode_annotation(self) -> bool:
        """1.27 reads service.kubernetes.io/topology-mode, the deprecated topology-aware-hints first, and takes any
        value but "", "disabled" and "Disabled"; 1.24-1.26 read only topology-aware-hints, and only "auto"/"Auto"
        (service.go and canUseTopology at S1.26 and S1.27, KEP-2433)."""
        return self.minor >= 27

    @property
    def node_hints(self) -> bool:
        """Endpoints hinted for this node are preferred over zone hints (KEP-3015's PreferSameTrafficDistribution:
        alpha 1.33, beta and on 1.34, GA 1.35; topologyModeFromHints at kubernetes/kubernetes@008b3652)."""
        return self.minor >= 34

    @property
    def traffic_distribution(self) -> tuple[str, ...]:
        """The spec.trafficDistribution values (KEP-4444, KEP-3015) the API keeps and the EndpointSlice controller
        hints for (trafficdist at kubernetes/kubernetes@90c8f9ae and @19952a2b): PreferClose from 1.31 (1.30's
        alpha gate is off, so the API server drops the field); PreferSameZone and PreferSameNode with
        PreferSameTrafficDistribution, on from 1.34 (that 1.33 drops them too, with its gate off, is INFERRED)."""
        if self.minor <= 30:
            return ()
        return ("PreferClose",) if self.minor <= 33 else ("PreferClose", "PreferSameZone", "PreferSameNode")

    @property
    def terminating_fallback(self) -> bool:
        """Serving, terminating endpoints stand in when none is ready (ProxyTerminatingEndpoints, KEP-1669: beta
        and on by default in 1.26, GA 1.28)."""
        return self.minor >= 26

    @property
    def ready_duplicate_wins(self) -> bool:
        """Of two endpoints of a Service port with the same "IP:port" (a pod IP reused while the old pod is still
        terminating: kubernetes#135266), the ready one is kept (#135593, in CHANGELOG-1.36.md: "Kube-proxy now
        correctly handles the case where a pod IP gets assigned to a newly-created pod when the pod that
        previously had that IP has been terminated but is not yet fully deleted"). Before, EndpointSliceCache's
        addEndpoints kept the first one met and let a later one replace it only when it was on this node
        (`!exists || isLocal`, pkg/proxy/endpointslicecache.go at danwinship/kubernetes@6c763fd5 and
        kubernetes/kubernetes@04791b49, READ), so a node kept the terminating copy and wrote no rules for it.
        That 1.36 still settles a tie between two alike copies as 1.35 did is INFERRED (its code is not stored)."""
        return self.minor >= 36

    @property
    def knows_unready_endpoints(self) -> bool:
        """Not-ready endpoints reach the proxier's endpoints map (1.21, EndpointSlice conditions kept); before,
        EndpointSliceCache dropped them (S1.20's newEndpointSliceInfo), before it merged copies of one IP. They
        count for ipvs' hairpin set and the health check."""
        return self.minor >= 21

    @property
    def unready_endpoint_chains(self) -> bool:
        """1.22 counts every known endpoint, ready or not, as "has endpoints" and gives each a KUBE-SEP chain
        (S1.22); 1.23 went back to ready ones (S1.23)."""
        return self.minor == 22

    # --- Service status --------------------------------------------------------------------------------

    @property
    def honours_ip_mode(self) -> bool:
        """A LoadBalancer ingress IP with ipMode: Proxy is left unprogrammed (LoadBalancerIPMode, KEP-1860: beta
        and on by default in 1.30, alpha and off in 1.29)."""
        return self.minor >= 30

    @property
    def external_ips_gated(self) -> bool:
        """A Service's externalIPs get rules only while the AllowServiceExternalIPs gate is on (deprecated and on
        by default; KEP-5707's first phase, #137293, among v1.36.0's deprecations in CHANGELOG/CHANGELOG-1.36.md at
        kubernetes/kubernetes@008b3652959ca58af8be3fb5b6ecfe9ae7638282; still on in v1.38.0-alpha.2). Off, the
        service port's ExternalIPs() is empty for every proxier, as the PR's review asked of the shared code (READ in
        its thread; INFERRED that it merged so: no 1.36+ serviceport.go is stored). Before 1.36 there is no gate."""
        return self.minor >= 36

    # --- kube-proxy's health check server --------------------------------------------------------------

    @property
    def health_counts_ready_only(self) -> bool:
        """healthCheckNodePort's localEndpoints counts ready local endpoints only from 1.21; before, every local
        endpoint. INFERRED and doubtful: S1.20's EndpointSliceCache already drops not-ready endpoints, so 1.20
        may never have seen one to count (docs/kubeproxy-versions.md)."""
        return self.minor >= 21

    @property
    def health_reports_proxy_healthy(self) -> bool:
        """The healthCheckNodePort body carries "serviceProxyHealthy" (1.27, pkg/proxy/healthcheck/
        service_health.go; KEP-3836)."""
        return self.minor >= 27

    @property
    def health_weight_header(self) -> bool:
        """The healthCheckNodePort answer carries X-Load-Balancing-Endpoint-Weight
        (pkg/proxy/healthcheck/service_health.go); that 1.28 is the first release is INFERRED, not pinned to a
        PR."""
        return self.minor >= 28

    # --- conntrack cleanup after a sync (every mode; lab/render/kubeproxy/conntrack.py) -------------------

    @property
    def udp_cleanup_readiness_aware(self) -> bool:
        """An endpoint counts as deleted when it stops being ready, not only when it leaves the slice (#106163,
        fixing the 1.22 regression #105657; 1.23. Its cherry-pick to release-1.22, #106239, is in a later 1.22
        patch release: the lab's 1.22 is the first-published one, without it)."""
        return self.minor >= 23

    @property
    def conntrack_reconciler(self) -> bool:
        """UDP entries are reconciled against the serving endpoints on every sync (#127318, with netlink instead
        of the conntrack binary, #126847; both 1.32), instead of deleted on endpoint events."""
        return self.minor >= 32

    @property
    def reconciler_cleans_scaled_to_zero(self) -> bool:
        """The reconciler also cleans a Service left with no serving endpoint (#139629, fixing #139628; merged in
        June 2026 and listed in v1.37.0-alpha.2, so first released in 1.37; no cherry-pick to 1.32-1.36 found)."""
        return self.minor >= 37

    @property
    def reconciler_cleans_deleted_services(self) -> bool:
        """The reconciler also cleans the frontends of the UDP Service ports deleted since the last sync (the service
        change tracker's DeletedServices, reconciled against an empty set before the live Services, which win a
        frontend they share; a NodePort is still skipped). READ: #141371 listed in v1.38.0-alpha.1
        (CHANGELOG/CHANGELOG-1.38.md at kubernetes/kubernetes@0411cc704533ed25a1bfc6e21a3195d9c6a2f0f2: "Conntrack
        entries for a deleted UDP Service's frontend IPs are now cleared on deletion instead of waiting to expire"),
        the code in CleanStaleEntries, pkg/proxy/conntrack/cleanup.go, and ServicePortMap.Update,
        pkg/proxy/servicechangetracker.go, at kiarashazarnia/kubernetes@4426ed5de01a08d75530f9e4c4814f6a28d806eb (the
        PR author's fork). INFERRED: that the merged code is the fork's (no kubernetes/kubernetes tree after the merge
        is stored)."""
        return self.minor >= 38

    # --- what kube-proxy does on the node besides rules (iptables and ipvs modes) -----------------------

    @property
    def holds_service_ports(self) -> bool:
        """kube-proxy holds every NodePort (and each externalIP:port that is an address of the node) open with a
        socket of its own that it never reads (k8s.io/utils/net ListenPortOpener: listen() for TCP, bind() for
        UDP, SCTP never), until #108496 removed the port opener (1.24). Read in the iptables and ipvs proxiers at
        S1.18 to S1.23; S1.24 has none."""
        return self.minor <= 23

    # --- iptables rules shared by the iptables and ipvs modes ------------------------------------------

    @property
    def kubelet_mark_drop(self) -> bool:
        """Traffic that may not pass is marked with kubelet's KUBE-MARK-DROP and dropped by kubelet's filter
        KUBE-FIREWALL, until #110289/#110290 (1.25) made kube-proxy drop it itself in filter."""
        return self.minor <= 24

    @property
    def ensures_mark_drop_chain(self) -> bool:
        """kube-proxy's iptables mode creates KUBE-MARK-DROP (EnsureChain) without filling it (1.20-1.24, S1.20
        to S1.24; 1.19 left it to kubelet)."""
        return self.minor >= 20 and self.kubelet_mark_drop

    @property
    def split_forward_conntrack_rules(self) -> bool:
        """Two KUBE-FORWARD conntrack rules ("pod source" / "pod destination") until 1.23 merged them (S1.23)."""
        return self.minor <= 22

    @property
    def health_check_accept_rules(self) -> bool:
        """filter rules ACCEPT healthCheckNodePorts: KUBE-NODEPORTS (iptables), KUBE-NODE-PORT with the
        KUBE-HEALTH-CHECK-NODE-PORT set (ipvs) (#97824, 1.21)."""
        return self.minor >= 21

    def kubelet_ownership_cleanup(self, gate: bool | None = None) -> bool:
        """kubelet stops writing KUBE-MARK-DROP / KUBE-FIREWALL (IPTablesOwnershipCleanup: alpha 1.25, on by
        default from 1.27 (#114472), locked on in 1.28 (#119374)). `gate` overrides the default where it could
        be switched (1.25-1.27)."""
        if gate is None:
            return self.minor >= 27
        if not 25 <= self.minor <= 27:
            raise ValueError(f"kubelet {self.version} has no IPTablesOwnershipCleanup gate to set")
        return gate

    @property
    def kubelet_localnet_rule_first(self) -> bool:
        """kubelet's KUBE-FIREWALL: up to 1.24 the mark rule was appended first; the rework around the
        IPTablesOwnershipCleanup gate ensures the "block incoming localnet connections" rule first (read in
        pkg/kubelet/kubelet_network_linux.go of the 1.27 cycle; the 1.25 boundary is INFERRED,
        docs/kubeproxy-versions.md)."""
        return self.minor >= 25

    # --- iptables mode ---------------------------------------------------------------------------------

    @property
    def cidr_suffix(self) -> bool:
        """-d/-s addresses written as "IP/32" (utilproxy.ToCIDR) until 1.23 wrote plain IPs (S1.23)."""
        return self.minor <= 22

    @property
    def forward_external_services(self) -> bool:
        """FORWARD jumps to KUBE-EXTERNAL-SERVICES, LB IPs without endpoints are rejected there, and INPUT no
        longer jumps to KUBE-SERVICES (#95252, 1.20)."""
        return self.minor >= 20

    @property
    def physdev_external_ips(self) -> bool:
        """externalIPs caught only from off-node (physdev/addrtype pair) and always masqueraded, until #96296
        (1.21) treated them like ClusterIPs."""
        return self.minor <= 20

    @property
    def masquerade_in_service_chain(self) -> bool:
        """KUBE-MARK-MASQ jumps move from KUBE-SERVICES/NODEPORTS into KUBE-SVC-* (#96959, 1.22)."""
        return self.minor >= 22

    @property
    def xlb(self) -> bool:
        """KUBE-XLB-* for externalTrafficPolicy=Local, until #109060 (1.24) brought KUBE-EXT/SVL."""
        return self.minor <= 23

    @property
    def xlb_endpoint_chains_first(self) -> bool:
        """1.23's syncProxyRules writes a Service's KUBE-SEP chains before its other rules (S1.23)."""
        return self.minor == 23

    @property
    def xlb_endpoint_rules_interleaved(self) -> bool:
        """Up to 1.21 each balancing rule is followed by its endpoint chain's rules (S1.21; 1.22 writes them
        after all balancing rules)."""
        return self.minor <= 21

    @property
    def xlb_affinity_over_known_endpoints(self) -> bool:
        """Affinity checks cover every endpoint with a chain, not only the balanced ones, and the KUBE-XLB
        chain balances inline (S1.22; 1.23 balances through the shared writers)."""
        return self.minor <= 22

    @property
    def arrow_comments(self) -> bool:
        """KUBE-SVC/SVL rules commented "SPN -> IP:port" (1.24, with #109060); before: SPN."""
        return self.minor >= 24

    @property
    def route_localnet_only_for_loopback_nodeports(self) -> bool:
        """route_localnet=1 only when NodePorts may be served on 127/8 (#107684, 1.24); before: always."""
        return self.minor >= 24

    @property
    def localhost_nodeports_flag(self) -> bool:
        """--iptables-localhost-nodeports (#108250, 1.26)."""
        return self.minor >= 26

    @property
    def own_kube_firewall(self) -> bool:
        """kube-proxy writes the "block incoming localnet connections" rule and its KUBE-FIREWALL jumps itself
        (#114470, 1.27)."""
        return self.minor >= 27

    @property
    def fw_trailing_comment(self) -> bool:
        """KUBE-FW-* ends with a comment-only "other traffic ... will be dropped" rule (1.27, S1.27)."""
        return self.minor >= 27

    @property
    def conditional_invalid_drop(self) -> bool:
        """No INVALID drop with nf_conntrack_tcp_be_liberal=1 (#120412, 1.29)."""
        return self.minor >= 29

    @property
    def source_ranges_as_written(self) -> bool:
        """loadBalancerSourceRanges copied as given (trimmed) until 1.30 wrote the parsed CIDR (S1.30)."""
        return self.minor <= 29

    @property
    def nfacct_invalid(self) -> bool:
        """INVALID drops counted with nfacct (#122812): not yet in S1.30 (1.30.3), so 1.31."""
        return self.minor >= 31

    @property
    def nfacct_localhost(self) -> bool:
        """Localhost NodePort packets counted with nfacct (#125015), 1.31 (inferred)."""
        return self.minor >= 31

    # --- ipvs mode -------------------------------------------------------------------------------------

    @property
    def ipvs_route_localnet(self) -> bool:
        """NewProxier sets route_localnet=1 (gone in S1.21)."""
        return self.minor <= 20

    @property
    def ipvs_loopback_node_port(self) -> bool:
        """NodePort virtual servers on loopback addresses such as 127.0.0.1, until #101023 (1.22) skipped them."""
        return self.minor <= 21

    @property
    def ipvs_sctp_local_first(self) -> bool:
        """The SCTP "-LOCAL" RETURN precedes the SCTP NodePort masquerade rule (1.23, S1.23)."""
        return self.minor >= 23

    @property
    def ipvs_nodeport_skips_bound(self) -> bool:
        """1.23-1.27 list node addresses minus what kube-ipvs0 holds (S1.23 to S1.27)."""
        return 23 <= self.minor <= 27

    @property
    def ipvs_conn_reuse_fixed_kernel(self) -> bool:
        """conn_reuse_mode is left alone on kernels >= 5.9 (1.22, issue 93297)."""
        return self.minor >= 22

    @property
    def ipvs_filter(self) -> bool:
        """KUBE-SERVICES loopback RETURN, KUBE-IPVS-IPS and KUBE-IPVS-FILTER (#108460, 1.26)."""
        return self.minor >= 26

    @property
    def ipvs_filter_health_check(self) -> bool:
        """KUBE-IPVS-FILTER RETURNs the KUBE-HEALTH-CHECK-NODE-PORT set (1.28, S1.28)."""
        return self.minor >= 28

    @property
    def ipvs_filter_external_local(self) -> bool:
        """KUBE-IPVS-FILTER RETURNs the KUBE-EXTERNAL-IP-LOCAL set (S1.30)."""
        return self.minor >= 30

    @property
    def ipvs_bind_only_foreign(self) -> bool:
        """externalIPs and LoadBalancer IPs already on another interface are not bound on kube-ipvs0 (1.28,
        S1.28)."""
        return self.minor >= 28

    @property
    def ipvs_out_filter(self) -> bool:
        """KUBE-IPVS-OUT-FILTER drops node-originated traffic to LB IPs whose source ranges exclude the node IP
        (1.29, S1.29)."""
        return self.minor >= 29

    # --- nftables mode ---------------------------------------------------------------------------------

    @property
    def nft_kernel_minimum(self) -> tuple[int, int] | None:
        """nftables mode refuses to start on a kernel older than 5.13 unless nftables.skipKernelVersionCheck is set
        (#124152, as the mode went beta, #124383, 1.31; that 1.30's alpha did not check is INFERRED)."""
        return (5, 13) if self.minor >= 31 else None

    @property
    def nft_element_storage(self) -> bool:
        """nftElementStorage (#126013, 1.31): set/map flushes at the end of setupNFTables (in another order),
        the firewall rule written after the external chain, no comment on firewall-ips elements."""
        return self.minor >= 31

    @property
    def nft_masquerade_matches_port(self) -> bool:
        """The ClusterIP masquerade rule matches "PROTO dport PORT" until #131492 (1.34) noticed that
        service-ips already matched it."""
        return self.minor <= 33

    @property
    def nft_pre_dnat_chains(self) -> bool:
        """filter-*-pre-dnat chains; input/forward/output at priority 0 (#132456, 1.34)."""
        return self.minor >= 34

    @property
    def nft_masquerade_rework(self) -> bool:
        """1.36 reworked masquerading for speed (#135800, #136499; both merged in the 1.36 cycle, and a 1.36.2
        node's `nft list` shows both, so no release has one without the other): no mark-for-masquerade chain (every
        jump to it becomes "mark set mark or MARK"); the masquerading chain masquerades a marked packet in one rule
        and a hairpin connection by the hairpin-connections set of local endpoints; one ClusterIP masquerade rule in
        the services chain instead of one per Service; endpoint chains only for ClientIP affinity, other Services
        DNAT through a numgen map (pkg/proxy/nftables/proxier.go at kiarashazarnia/kubernetes@4426ed5d)."""
        return self.minor >= 36

    @property
    def knows_service_cidrs(self) -> bool:
        """kube-proxy learns the Service CIDRs (the ServiceCIDR objects; the API server makes the default one,
        "kubernetes", from --service-cluster-ip-range, a CIDR of each family in dual-stack) by watching them, and
        it watches them only with the MultiCIDRServiceAllocator gate on (cmd/kube-proxy/app/server.go at
        kubernetes/kubernetes@002c85b2, ProxyServer.Run: NewServiceCIDRConfig under
        utilfeature.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator)). The gate is alpha from 1.27 and
        beta from 1.31, both off by default, GA and on by default in 1.33 (#128971), locked on from 1.34
        (pkg/features/kube_features.go). Only the nftables proxier uses them: from 1.30 (#122692) its
        cluster-ips-check chain drops new traffic to an unallocated address of its own family's Service CIDRs
        (OnServiceCIDRsChanged keeps the proxier's family and joins them into `ip daddr { CIDRs } drop`); until the
        watch delivers them, or with the gate off, the chain has only the reject for wrong ports of active
        ClusterIPs, and such a packet is routed on, untouched. The iptables and ipvs proxiers' OnServiceCIDRsChanged
        does nothing (pkg/proxy/iptables/proxier.go, pkg/proxy/ipvs/proxier.go: `OnServiceCIDRsChanged(_
        []string) {}`): neither has an equivalent, and 1.29's nftables proxier had no cluster-ips-check chain
        (pkg/proxy/nftables/proxier.go at kubernetes/kubernetes@01d7de54). The gate on in 1.30-1.32 (with the API
        server serving networking.k8s.io/v1alpha1 or v1beta1 ServiceCIDRs, off by default) is not modelled."""
        return self.minor >= 33

    @property
    def nft_single_endpoint_dnat(self) -> bool:
        """A Service port with one endpoint DNATs to it without a numgen map (#140723, in v1.37.0-rc.0)."""
        return self.minor >= 37

    @property
    def nft_localhost_nodeports_gate(self) -> bool:
        """The KubeProxyNFTablesLocalhostNodePorts gate (alpha, off by default; #138427, listed in v1.37.0-rc.0;
        KEP-6032). With it on, setupNFTables writes the localhost-nodeport-reject-ports map, a counter and a rejecting
        chain per protocol it rejects, and a nodeport-endpoints-check rule sending 127.0.0.0/8 NodePort traffic to
        that map; when nodePortAddresses names a loopback CIDR itself (ContainsExplicitLoopback), kube-proxy also runs a
        userspace TCP proxy on 127.0.0.1:NODEPORT to the Service's endpoints, and rejects only UDP and SCTP
        (pkg/proxy/nftables/proxier.go at kiarashazarnia/kubernetes@4426ed5d; pkg/proxy/localnodeportproxy/proxy.go
        at kubernetes/kubernetes@0cee7368). Before 1.37 there is no such gate: nftables mode never serves 127/8."""
        return self.minor >= 37

    @property
    def nft_localhost_nodeports_by_default(self) -> bool:
        """KubeProxyNFTablesLocalhostNodePorts is on unless the configuration turns it off: beta and on by default in
        1.38 (#142490, READ in v1.38.0-alpha.2 of CHANGELOG/CHANGELOG-1.38.md at
        kubernetes/kubernetes@0411cc704533ed25a1bfc6e21a3195d9c6a2f0f2); KEP-6032 keeps nftables' default
        nodePortAddresses (`primary`) and starts the proxy only where they name a loopback address (README.md at
        kubernetes/enhancements@f87c78cddef599a4b648d23ef3ee7322b7cb353d; beta in v1.38 in kep.yaml at
        kubernetes/enhancements@72e1af9c8deb2d22032e4d0a50e0555c7d68bfe5). That the beta changes no rule or listener,
        so the gate on behaves as 1.37's (the userspace proxy only where nodePortAddresses names a loopback CIDR, the
        rejects otherwise), is INFERRED: no tree with #142490 is stored."""
        return gate_default(self.version, "KubeProxyNFTablesLocalhostNodePorts")

    @property
    def nft_comment_limit(self) -> int | None:
        """Comments are cut to the kernel's 128 bytes (#139516, in v1.37.0-alpha.1, fixing #139515); before, a
        longer one (a 63-character namespace and Service name) made nft refuse kube-proxy's whole transaction."""
        return 128 if self.minor >= 37 else None
