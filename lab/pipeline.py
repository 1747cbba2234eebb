"""The pipeline's stages for one scenario variant: render → realize → install held (`standing`), its probe session
opened (`probing`), steps done (`steps_before`); the runners above (lab.api's Cluster, which `lab run` goes
through too) probe, judge and tear down."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from lab.describe.releases import check_feature_gate
from lab.describe.topology import ProbeSpec, Topology
from lab.doctor import kernel_has, running_kernel, skip_reason
from lab.install.actors import install_actors
from lab.install.calico import ensure_felix
from lab.install.dataplane import FirstSync, apply_rules, clean_conntrack, read_states
from lab.install.flannel import ensure_flannel_rules
from lab.install.ports import PortHolder
from lab.install.steps import StepDone, run_steps
from lab.probe.session import ProbeSession
from lab.realize.build import Realized, realize
from lab.render.dataplane import NodeDataplane, kernel_version, render, setups
from lab.render.kubeproxy.kernel_state import Reads
from lab.render.kubeproxy.nftables import check_nftables_version
from lab.render.kubeproxy.sync import listed_after_rules, reads
from lab.render.kubeproxy.sync import sync as plan_sync
from lab.render.kubeproxy.versions import Release

IMPLEMENTED_MODES = ("iptables", "ipvs", "nftables")


def on_this_kernel(topo: Topology) -> Topology:
    """The variant as it runs here: one described for no kernel (a test's load_scenario) is given this one."""
    return topo if topo.kernel else dataclasses.replace(topo, kernel=running_kernel())


def cannot_run(topo: Topology) -> str:
    """Why this machine cannot run the variant ("" if it can)."""
    if topo.not_yet_built:
        return topo.not_yet_built
    mode = topo.cluster.proxy_mode
    if mode == "nftables" and (problem := check_nftables_version(topo.cluster.kube_version)):
        return problem
    for gate, _ in topo.cluster.feature_gates:
        if problem := check_feature_gate(topo.cluster.kube_version, gate):
            return problem
    least = Release.of(topo.cluster.kube_version).nft_kernel_minimum if mode == "nftables" else None
    if least and (kernel := kernel_version(on_this_kernel(topo).kernel)) < least:
        return (
            f"kube-proxy {topo.cluster.kube_version}'s nftables mode refuses to start on kernel "
            f"{kernel[0]}.{kernel[1]}: it needs {least[0]}.{least[1]} (kubernetes#124152; "
            "nftables.skipKernelVersionCheck is not modelled)"
        )
    if mode == "ipvs":
        for feature in ("ip_vs", "dummy"):
            if not kernel_has(feature):
                return skip_reason(feature)
    if mode not in IMPLEMENTED_MODES:
        return f"proxyMode {mode} is not implemented in the lab yet"
    if topo.cluster.cni == "routed-tunnel" and topo.cluster.tunnel != "auto" and not kernel_has(topo.cluster.tunnel):
        return skip_reason(topo.cluster.tunnel)
    if topo.cluster.cni == "flannel" and not kernel_has("vxlan"):
        return skip_reason("vxlan")
    return ""


def tunnel_kind(topo: Topology) -> str:
    """Which device carries cni routed-tunnel on this host: ipip where the kernel has it, else VXLAN ("" for
    bridge). Asked here, once per variant, so that realize builds what it is told."""
    if topo.cluster.cni != "routed-tunnel":
        return ""
    if topo.cluster.tunnel != "auto":
        return topo.cluster.tunnel
    return "ipip" if kernel_has("ipip") else "vxlan"


@dataclass(frozen=True)
class Standing:
    """A variant built and installed: its namespaces, kube-proxy's held ports, and when each stage ended."""

    realized: Realized
    ports: PortHolder
    rendered: float  # perf_counter when render was done
    built: float  # ... realize, with kube-proxy's first sync on every node (which ran alongside)
    installed: float  # ... and the rest of install
    said: tuple[str, ...] = ()  # what each node's first kube-proxy sync said ("node: line"): a failed sync
    first_sync: float = 0.0  # seconds kube-proxy's first sync took on every node, within the build's
    planes: Mapping[str, NodeDataplane] = field(default_factory=dict)  # what render wrote for each node, by node name


@contextmanager
def standing(topo: Topology) -> Iterator[Standing]:
    """render → realize → install (kube-proxy's rules and held ports, then the actors around the cluster); torn
    down on exit. kube-proxy's first sync starts on each node once it is built and runs alongside the rest of the
    build (FirstSync): the other nodes and the pods, most of a cluster's namespaces, are made meanwhile. Whatever a
    stage starts in the namespaces (health servers) is stopped before realize removes them."""
    topo = on_this_kernel(topo)
    planes = render(topo)
    rendered = time.perf_counter()
    first = FirstSync(planes, topo)
    with ExitStack() as stack:
        realized = stack.enter_context(realize(topo, setups(planes), tunnel_kind(topo), alongside=first.alongside))
        ensure_flannel_rules(realized)  # after kube-proxy's first sync, as flanneld's resync finds it
        ensure_felix(realized)  # likewise, as Felix finds it
        built = time.perf_counter()
        ports = PortHolder(realized)
        stack.callback(ports.close)
        ports.sync(planes)
        install_actors(realized, stack)
        installed = time.perf_counter()
        yield Standing(realized, ports, rendered, built, installed, first.said, first.seconds, MappingProxyType(planes))


@contextmanager
def probing(stood: Standing, timeout: float, pcap_dir: Path | None = None) -> Iterator[ProbeSession]:
    """The probe session of a standing variant, told what each node's first kube-proxy sync said (a refused one
    is then said by every probe); closed on exit."""
    with ProbeSession(stood.realized, timeout, pcap_dir) as session:
        session.kube_proxy_synced(stood.said)
        session.reasons.rendered(stood.realized.topology, stood.planes)
        yield session


def steps_before(
    stood: Standing, session: ProbeSession, running: Topology, probe: ProbeSpec
) -> tuple[Topology, list[StepDone]]:
    """Do the probe's `before:` steps to the cluster running `running`, each workload change followed by kube-proxy's
    sync on every node; the session told. The topology they leave, and what each did."""
    session.note(f"steps before {probe.name}")
    plugged = len(stood.realized.plugged)
    running, steps = run_steps(stood.realized, running, probe, kube_proxy_sync(stood.realized, stood.ports))
    if new := list(stood.realized.plugged.values())[plugged:]:  # pods the build did not foresee: backends too
        session.pods_added(new, running)
    session.rules_changed()
    for done in steps:
        if not done.step.argv:  # a workload change: every node's kube-proxy synced
            session.kube_proxy_synced(done.said)
    session.note("kube-proxy synced")
    return running, steps


def kube_proxy_sync(realized: Realized, ports: PortHolder) -> Callable[[Topology, Topology, bool], tuple[str, ...]]:
    """kube-proxy's sync after a change, on every node: its kernel state read, the plan its release makes of it
    (render/kubeproxy/sync.py: rules, addresses, set members, real servers, conntrack deletions), the plan
    applied and the ports it holds (restart: as a new process's first sync), the conntrack cleanup last, from
    entries listed after the rules for the 1.32+ reconciler. What each node's kube-proxy said."""

    def sync(before: Topology, after: Topology, restart: bool) -> tuple[str, ...]:
        wanted = reads(after)
        states = read_states(realized, dataclasses.replace(wanted, conntrack=False))
        plans = {node: plan_sync(before, after, node, state, restart) for node, state in states.items()}
        ports.sync({node: plan.dataplane for node, plan in plans.items()}, restart)
        applied = apply_rules(realized, plans)
        ensure_flannel_rules(realized)
        ensure_felix(realized)
        if wanted.conntrack:  # the reconciler lists the UDP entries once the rules are written
            listed = read_states(realized, Reads(conntrack=True))
            plans = {node: listed_after_rules(plan, listed[node]) for node, plan in plans.items()}
        return clean_conntrack(realized, plans, applied)

    return sync
