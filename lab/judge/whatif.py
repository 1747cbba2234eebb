"""`lab run --what-if PROBE`: which settings to try, from the probe's translation chain, and what each did.

Pure. The settings tried are those behind the rules the probe's packets met (lab/probe/diagnosis.py: each step
names the Kubernetes field or kube-proxy setting that wrote its rule), each changed on its own to every other value
it takes: a Service's field is a change kube-proxy resyncs in the lab as built (RESYNC); a node's setup (kube-proxy's
flags, its proxy mode, kubelet's hairpin mode) is another variant, built anew (VARIANT). A setting the lab cannot
change, or a rule no setting it knows wrote, is said untried, with why. What each change did is the kernel's:
every probe of the variant runs again under it, and its outcome and the source each backend saw are compared with
the run as written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.describe.resolve.whatif import ServiceField
from lab.describe.topology import Axis, ProbeSpec, ServiceSpec, Topology
from lab.judge.results import ProbeResult
from lab.probe.diagnosis import DNAT, IPVS, MARKED, MASQUERADE, Diagnosis, Step
from lab.probe.observation import Observation
from lab.render.kubeproxy.because import Setting

RESYNC = "resync"  # a Service field: the lab as built, kube-proxy told of the change and resyncing every node
VARIANT = "variant"  # a node's setup: another variant of the scenario, built anew

PROXY_MODES = ("iptables", "ipvs", "nftables")
HAIRPIN_MODES = ("hairpin-veth", "promiscuous-bridge", "none")
# kube-proxy's and kubelet's settings a step may name, as the matrix axis that sets each and the values it takes.
_NODE_SETUPS: dict[str, tuple[str, tuple[Axis, ...]]] = {
    "masqueradeAll": ("masqueradeAll", (True, False)),
    "clusterCIDR": ("kubeProxyClusterCIDR", (True, False)),  # the detector is on when kube-proxy has --cluster-cidr
    "hairpinMode": ("hairpinMode", HAIRPIN_MODES),
    "proxyMode": ("proxyMode", PROXY_MODES),
}
# A Service's fields a step may name, with the values each takes.
_SERVICE_FIELDS: dict[str, tuple[str, ...]] = {
    "externalTrafficPolicy": ("Cluster", "Local"),
    "internalTrafficPolicy": ("Cluster", "Local"),
    "sessionAffinity": ("ClientIP", "None"),
}


@dataclass(frozen=True)
class Change:
    """One setting changed: `setting` as the probe's chain named it, `name` the field or matrix axis set to `value`,
    `how` RESYNC (with the Service's field) or VARIANT."""

    setting: Setting
    name: str
    value: Axis
    how: str
    service: ServiceField | None = None

    def __str__(self) -> str:
        value = str(self.value).lower() if isinstance(self.value, bool) else self.value
        return str(self.service) if self.service else f"{self.name}: {value}"


def choose(
    diagnoses: Sequence[Diagnosis], topo: Topology, probe: ProbeSpec
) -> tuple[tuple[Change, ...], tuple[str, ...]]:
    """The changes to try for a probe whose connections were diagnosed as `diagnoses` in the variant `topo`, in the
    order the chain named their settings; and what the chain named that none of them changes, with why."""
    changes: list[Change] = []
    untried: list[str] = []
    for setting in settings_of(diagnoses, topo):
        found, why = _changes_of(setting, topo, probe)
        changes += [c for c in found if c not in changes]
        if why and why not in untried:
            untried.append(why)
    for step in (s for d in diagnoses for s in d.steps):
        if step.kind == MASQUERADE and step.setting is None:
            said = f"the masquerade by {step.where} on {step.node}: a rule no setting the lab knows wrote"
            if said not in untried:
                untried.append(said)
    return tuple(changes), tuple(untried)


def settings_of(diagnoses: Sequence[Diagnosis], topo: Topology) -> tuple[Setting, ...]:
    """The settings behind the rules every connection met, each once, in path order; then the proxy mode, behind
    every rule kube-proxy wrote, when a step is one of them."""
    found: list[Setting] = []
    for diagnosis in diagnoses:
        found += [s for s in diagnosis.settings if s not in found]
    if any(_kube_proxys(step) for d in diagnoses for step in d.steps):
        mode = topo.cluster.proxy_mode
        found.append(Setting("proxyMode", mode, "kube-proxy", "the mode that wrote every kube-proxy rule it met"))
    return tuple(found)


def _kube_proxys(step: Step) -> bool:
    """A step kube-proxy's rules took: its DNAT, IPVS's forwarding, its mark, or a masquerade it marked for (not
    ip-masq-agent's or a CNI's)."""
    owner = step.setting.owner if step.setting else ""
    marked = owner == "kube-proxy" or owner.startswith(("Service ", "the Services"))
    return step.kind in (DNAT, IPVS, MARKED) or (step.kind == MASQUERADE and marked)


def _changes_of(setting: Setting, topo: Topology, probe: ProbeSpec) -> tuple[list[Change], str]:
    """The changes of one setting, or why there is none."""
    if setting.name in _SERVICE_FIELDS:
        service = _service(setting, topo, probe)
        if service is None:
            return [], f"{setting} ({setting.owner}): no Service of the scenario it names or the probe reaches"
        values = [v for v in _SERVICE_FIELDS[setting.name] if v != setting.value]
        fields = [ServiceField(service.namespace, service.name, setting.name, v) for v in values]
        return [Change(setting, f.field, f.value, RESYNC, f) for f in fields], ""
    if setting.name in _NODE_SETUPS:
        axis, values = _NODE_SETUPS[setting.name]
        return [Change(setting, axis, v, VARIANT) for v in values if v != _value(setting)], ""
    return [], f"{setting} ({setting.owner}): nothing the lab sets changes it"


def _value(setting: Setting) -> Axis:
    """The setting's value as its matrix axis holds it: the local-traffic detector named by its CIDR is on."""
    if setting.name == "masqueradeAll":
        return setting.value == "true"
    return True if setting.name == "clusterCIDR" else setting.value


def _service(setting: Setting, topo: Topology, probe: ProbeSpec) -> ServiceSpec | None:
    """The Service whose field the setting is: the one it names (`Service NAMESPACE/NAME`), else (a rule written
    for several Services at once, as ipvs' ipset rules) the one the probe is addressed to."""
    named = setting.owner.removeprefix("Service ")
    for svc in topo.services:
        if f"{svc.namespace}/{svc.name}" == named:
            return svc
    return next((svc for svc in topo.services if _reaches(svc, probe, topo)), None)


def _reaches(svc: ServiceSpec, probe: ProbeSpec, topo: Topology) -> bool:
    frontends = {*svc.cluster_ips, *svc.external_ips, *svc.ingress_ips}
    node_ips = {ip for n in topo.nodes for ip in n.addresses}
    for port in svc.ports:
        if (probe.dst_ip in frontends and port.port == probe.dst_port) or (
            probe.dst_ip in node_ips and port.node_port == probe.dst_port
        ):
            return True
    return False


def diagnoses_of(observed: Observation) -> tuple[Diagnosis, ...]:
    """The chains of every connection a probe judged: each endpoint's member's, or its own."""
    return tuple(m.diagnosis for m in observed.members) or (observed.diagnosis,)


Fate = tuple[str, tuple[tuple[str, str], ...]]


def fate(observed: Observation) -> Fate:
    """A probe's outcome and, for each endpoint it reached, the backend and the source that backend saw."""
    seen = observed.members or (observed,)
    return observed.outcome, tuple((o.backend or "", o.source or o.source_ip or "") for o in seen)


@dataclass(frozen=True)
class Tried:
    """A change and every probe of the variant under it; `skipped` says why this machine could not run it."""

    change: Change
    results: tuple[ProbeResult, ...] = ()
    skipped: str = ""
    built: str = ""  # how it ran, in words (resynced in the lab as built, or the variant built anew, and why)


@dataclass(frozen=True)
class Difference:
    """A probe whose fate a change altered: the result as written and under the change; `what` is "outcome" or
    "source"; `kept` when the backend now sees the probe's own sender, which it did not."""

    before: ProbeResult
    after: ProbeResult
    what: str
    kept: bool


@dataclass(frozen=True)
class WhatIf:
    """The what-if of one probe in one variant: the run as written, the settings its chain named, each change and
    what it did, and what was not tried."""

    probe: str
    baseline: tuple[ProbeResult, ...]
    settings: tuple[Setting, ...]
    tried: tuple[Tried, ...]
    untried: tuple[str, ...]

    @property
    def target(self) -> ProbeResult:
        return next(r for r in self.baseline if r.probe.name == self.probe)


def differences(baseline: Sequence[ProbeResult], tried: Tried) -> tuple[Difference, ...]:
    """Each probe whose fate the change altered, in the scenario's order."""
    after = {r.probe.name: r for r in tried.results}
    found = []
    for before in baseline:
        changed = after.get(before.probe.name)
        if changed is None:
            continue
        (was, seen_before), (now, seen_after) = fate(before.observed), fate(changed.observed)
        if was != now:
            found.append(Difference(before, changed, "outcome", False))
        elif seen_before != seen_after:
            sender = before.probe.source
            kept = all(s == sender for _, s in seen_after) and any(s != sender for _, s in seen_before)
            found.append(Difference(before, changed, "source", kept))
    return tuple(found)
