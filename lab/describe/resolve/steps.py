"""A probe's `before:` steps, resolved in file order against the workload the earlier steps left: each change
to the workload (a Service or Pod deleted, a Deployment scaled down, a pod's conditions set) yields the pods and
Services the cluster runs after it, so that later stages only load what describe decided."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from lab.describe import k8s, schema
from lab.describe.refs import ObjectRef, replica_name
from lab.describe.resolve.checks import node_names
from lab.describe.resolve.matrix import Variant
from lab.describe.resolve.workload import Demand, without_endpoints
from lab.describe.topology import PodSpec, ServicePortSpec, ServiceSpec, StepSpec, Topology
from lab.describe.yamlsrc import FieldPath, Source

DEFAULT_STEP_TIMEOUT = 60  # seconds a `run:` step's command may take on a node unless its `timeout:` says


@dataclass(frozen=True)
class Workload:
    """What runs at one point of the timeline."""

    pods: tuple[PodSpec, ...]
    services: tuple[ServiceSpec, ...]
    deleted: tuple[tuple[str, FieldPath], ...] = ()  # pods deleted so far, and the step that did it
    pending: tuple[PodSpec, ...] = ()  # replicas built for a later scale-up, not created yet
    # Every Service with the endpoints it would have if every built pod ran: where a created replica's come from.
    potential: tuple[ServiceSpec, ...] = ()
    controllers: frozenset[tuple[str, str, str]] = frozenset()  # (kind, namespace, name) of each one a step scales


def scale_demand(variant: Variant, probes: list[schema.Probe], workload: list[k8s.Manifest]) -> Demand:
    """How many replicas each Deployment or ReplicaSet's scale steps create beyond those it declares, in this
    variant and file order: a scale-up makes new pods (new names, new addresses), never re-creates deleted
    ones, so realize builds them all at the start."""
    running = {(m.kind, m.metadata.namespace, m.metadata.name): m.spec.replicas for m in workload if m.kind in SCALED}
    created = dict.fromkeys(running, 0)
    largest: dict[tuple[str, str, str], tuple[int, FieldPath]] = {}  # the step asking for the most at once
    for i, probe in enumerate(probes):
        for k, step in enumerate(probe.before):
            spath: FieldPath = ("probes", i, "before", k)
            if not variant.applies(spath, step.when):
                continue
            ref = ObjectRef.parse(step.scale or step.delete or "", kinded=True)
            if step.scale is not None and step.replicas is not None and (ref.kind, ref.namespace, ref.name) in running:
                key = (ref.kind, ref.namespace, ref.name)
                created[key] += max(0, step.replicas - running[key])
                running[key] = step.replicas
                if step.replicas > largest.get(key, (-1, ()))[0]:
                    largest[key] = (step.replicas, spath)
            elif step.delete is not None and ref.kind == "Pod" and ref.replica is not None:
                # A replica is OWNER-N: deleting one leaves its Deployment a pod short (no controller replaces it).
                for key in running:
                    if key[1] == ref.namespace and replica_name(key[2], ref.replica) == ref.name:
                        running[key] -= 1
    return {key: (n, largest[key][1]) for key, n in created.items() if n}


SCALED = ("Deployment", "ReplicaSet")


def resolve_steps(
    variant: Variant, path: FieldPath, probe: schema.Probe, topo: Topology, now: Workload
) -> tuple[tuple[StepSpec, ...], Workload]:
    """The steps before the probe whose `when` this variant matches, and the workload they leave."""
    src = variant.source
    steps = []
    for k, step in enumerate(probe.before):
        spath: FieldPath = (*path, "before", k)
        if not variant.applies(spath, step.when):
            continue
        if step.run is not None:
            steps.append(_command(src, spath, step, topo))
            continue
        if step.restart is not None:
            steps.append(StepSpec(text="restart kube-proxy on every node (a full resync, as at start)", restart=True))
            continue
        if step.delete is not None:
            dpath: FieldPath = (*spath, "delete")
            if _reference(src, dpath, step.delete, ("Service", "Pod"))[0] == "Service":
                text, now = _delete_service(src, dpath, step.delete, now)
            else:
                text, now = _delete_pods(src, dpath, [_pod(src, dpath, step.delete, now)], now)
        elif step.scale is not None:
            assert step.replicas is not None
            text, now = _scale(src, spath, step.scale, step.replicas, now)
        else:
            assert step.set_pod is not None
            text, now = _set_conditions(src, spath, step, now)
        steps.append(StepSpec(text=f"{text} (kube-proxy resyncs every node)", pods=now.pods, services=now.services))
    return tuple(steps), now


def _command(src: Source, spath: FieldPath, step: schema.Step, topo: Topology) -> StepSpec:
    assert step.run is not None
    try:
        argv = tuple(shlex.split(step.run))
    except ValueError as exc:
        raise src.error((*spath, "run"), f"cannot split the command line: {exc}") from None
    if not argv:
        raise src.error((*spath, "run"), "expected a command, e.g. `ip addr del 10.0.0.1/32 dev eth0`")
    nodes = node_names(src, (*spath, "nodes"), step.nodes, topo.nodes) or tuple(n.name for n in topo.nodes)
    return StepSpec(
        text=f"on {', '.join(nodes)}: {shlex.join(argv)}",
        argv=argv,
        nodes=nodes,
        timeout=step.timeout or DEFAULT_STEP_TIMEOUT,
        origin=f"{src.file}:{src.line_of((*spath, 'run'))}",
    )


def _reference(src: Source, path: FieldPath, text: str, kinds: tuple[str, ...]) -> tuple[str, str, str]:
    """(kind, namespace, name) of "Kind/[NAMESPACE/]NAME"."""
    ref = ObjectRef.parse(text, kinded=True)
    if ref.kind not in kinds or not ref.name:
        forms = " or ".join(f"{k}/NAME" for k in kinds)
        raise src.error(path, f"expected {forms} (or KIND/NAMESPACE/NAME), got {text!r}")
    return ref.kind, ref.namespace, ref.name


def _delete_service(src: Source, path: FieldPath, text: str, now: Workload) -> tuple[str, Workload]:
    _, namespace, name = _reference(src, path, text, ("Service",))
    if (namespace, name) not in {(s.namespace, s.name) for s in now.services}:
        known = ", ".join(f"{s.namespace}/{s.name}" for s in now.services) or "none left"
        raise src.error(path, f"no Service {namespace}/{name} in the workload at this step; it has {known}")
    kept = tuple(s for s in now.services if (s.namespace, s.name) != (namespace, name))
    return f"delete Service {namespace}/{name}", replace(now, services=kept)


def _pod(src: Source, path: FieldPath, text: str, now: Workload) -> PodSpec:
    _, namespace, name = _reference(src, path, text, ("Pod",))
    pod = next((p for p in now.pods if (p.namespace, p.kube_name) == (namespace, name)), None)
    if pod is not None:
        return pod
    deleted = dict(now.deleted)
    gone = deleted.get(f"{namespace}/{name}") or deleted.get(name)
    if gone is not None:
        raise src.error(path, f"pod {namespace}/{name} was deleted before, at line {src.line_of(gone)}")
    known = ", ".join(f"{p.namespace}/{p.kube_name}" for p in now.pods) or "none left"
    raise src.error(path, f"no pod {namespace}/{name} in the workload at this step; it has {known}")


def _delete_pods(src: Source, path: FieldPath, pods: list[PodSpec], now: Workload) -> tuple[str, Workload]:
    """The pods' network goes, and with it their endpoints (a Deployment's controller makes no replacement
    here: scale it back up to have one)."""
    for pod in pods:
        if pod.host_network:
            raise src.error(path, f"pod {pod.name} uses the node's network: deleting it would take the node's own")
    names = {p.name for p in pods}
    kept = tuple(p for p in now.pods if p.name not in names)
    services = tuple(without_endpoints(s, names) for s in now.services)
    deleted = (*now.deleted, *((name, path) for name in sorted(names)))
    return f"delete Pod {', '.join(p.name for p in pods)}", replace(now, pods=kept, services=services, deleted=deleted)


def _create_pods(pods: list[PodSpec], now: Workload) -> tuple[str, Workload]:
    """New replicas run, and join the endpoints of the Services that select them (as at the start: ready)."""
    names = {p.name for p in pods}
    potential = {(s.namespace, s.name): s for s in now.potential}
    services = []
    for svc in now.services:
        full = potential.get((svc.namespace, svc.name))
        ports = []
        for port in svc.ports:
            wanted = full.port(port.name or port.port) if full else None
            joining = tuple(ep for ep in (wanted.endpoints if wanted else ()) if ep.pod in names)
            ports.append(replace(port, endpoints=(*port.endpoints, *joining)))
        services.append(replace(svc, ports=tuple(ports)))
    pending = tuple(p for p in now.pending if p.name not in names)
    after = replace(now, pods=(*now.pods, *pods), services=tuple(services), pending=pending)
    return f"create Pod {', '.join(p.name for p in pods)}", after


def _scale(src: Source, spath: FieldPath, text: str, replicas: int, now: Workload) -> tuple[str, Workload]:
    """Scaling down removes the highest-numbered replicas, as a ReplicaSet removes the newest pods first."""
    kind, namespace, name = _reference(src, (*spath, "scale"), text, ("Deployment", "ReplicaSet"))
    owned = [p for p in now.pods if p.owner == f"{kind}/{name}" and p.namespace == namespace]
    if (kind, namespace, name) not in now.controllers:
        known = ", ".join(f"{k}/{ns}/{n}" for k, ns, n in sorted(now.controllers)) or "none"
        raise src.error((*spath, "scale"), f"no {kind} {namespace}/{name} in the workload; it has {known}")
    ordered = sorted(owned, key=lambda p: ObjectRef.parse(p.name).replica or 0)  # each one a replica: OWNER-N
    if replicas == len(owned):
        return f"scale {kind} {name} to {replicas} (no change)", now
    if replicas > len(owned):
        built = [p for p in now.pending if p.owner == f"{kind}/{name}" and p.namespace == namespace]
        # scale_demand built what this variant's steps create, in the order they do it.
        if len(built) < replicas - len(owned):
            raise src.error(
                (*spath, "replicas"),
                f"{kind} {name} would need {replicas - len(owned)} new replicas here and the lab built "
                f"{len(built)} for it: a step it could not foresee changed the count (please report this)",
            )
        text_, after = _create_pods(built[: replicas - len(owned)], now)
    else:
        text_, after = _delete_pods(src, (*spath, "scale"), ordered[replicas:], now)
    return f"scale {kind} {name} to {replicas}: {text_.lower()}", after


def _set_conditions(src: Source, spath: FieldPath, step: schema.Step, now: Workload) -> tuple[str, Workload]:
    """A pod's readiness, or its termination (deleted, still running: its endpoints stay, serving as its
    readiness says, not ready), as the EndpointSlice controller publishes them."""
    assert step.set_pod is not None
    pod = _pod(src, (*spath, "set"), step.set_pod, now)
    ready = pod.ready if step.ready is None else step.ready
    terminating = pod.terminating or bool(step.terminating)
    changed = replace(pod, ready=ready, terminating=terminating)
    pods = tuple(changed if p.name == pod.name else p for p in now.pods)
    services = tuple(replace(s, ports=tuple(_conditions(port, changed) for port in s.ports)) for s in now.services)
    what = "terminating" if terminating else "ready" if ready else "not ready"
    said = f"ready={_word(ready and not terminating)} serving={_word(ready)} terminating={_word(terminating)}"
    return f"set Pod {pod.name} {what} (endpoints {said})", replace(now, pods=pods, services=services)


def _word(value: bool) -> str:
    return str(value).lower()


def _conditions(port: ServicePortSpec, pod: PodSpec) -> ServicePortSpec:
    endpoints = tuple(
        replace(ep, ready=pod.ready and not pod.terminating, serving=pod.ready, terminating=pod.terminating)
        if ep.pod == pod.name
        else ep
        for ep in port.endpoints
    )
    return replace(port, endpoints=endpoints)
