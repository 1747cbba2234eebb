"""Who announces a LoadBalancer Service's address on a bare-metal cluster, read from the announcer's own objects:
MetalLB's IPAddressPools with their L2Advertisements and BGPAdvertisements (metallb.io/v1beta1), and kube-vip's
configuration (the environment of its DaemonSet or static pod). lab import writes from them the scenario's layer 2
load balancers (a node's speaker answers ARP for the VIP, elected as MetalLB elects) and, for BGP, the routes the
peer learns (the client stands in for it: a route to the VIP over each announcing node).

MetalLB as read here: metallb/metallb at 7938d3f89b8bd808dae2e42d97d6ae7e18e9ed54, api/v1beta1 (the fields),
internal/config/config.go (addressPoolFromCR, ParseCIDR, setL2AdvertisementsToPools, selectedNodes: which pools and
nodes an advertisement takes), speaker/main.go (poolFor: a Service's pool is the one holding all its addresses),
speaker/layer2_controller.go (ShouldAnnounce, speakersForAds), speaker/bgp_controller.go (ShouldAnnounce). kube-vip
as read here: kube-vip/kube-vip at bee5cfe4a249e6cb0859c0483028066066d49d4a, pkg/kubevip/config_envvar.go and
config_environment.go (the variables, each a strconv.ParseBool), pkg/lease/lease.go and pkg/election/election.go
(each leader's Lease, held by its node's name).

An address in the nodes' network that neither announces is taken to be announced as MetalLB's layer 2 would, and
said: a client's ARP for it would otherwise go unanswered and every probe through it be lost with nothing saying
why. One the lab cannot announce (IPv6: NDP) is left out of its Service with its probes, said."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lab.describe.digits import is_ascii_number
from lab.describe.families import Family, family_of
from lab.describe.kubectl.cluster import Node
from lab.describe.kubectl.names import Names
from lab.describe.kubectl.nodestate import EXCLUDE_LABEL
from lab.describe.kubectl.objects import Inputs, Obj
from lab.describe.kubectl.selectors import selects
from lab.describe.kubectl.services import ROUTED, Service
from lab.describe.yamlsrc import FieldPath

METALLB_API = "metallb.io/v1beta1"
POOL, L2, BGP = "IPAddressPool", "L2Advertisement", "BGPAdvertisement"  # among objects.py's ANNOUNCER_KINDS
# The Service annotations MetalLB's controller reads to allocate (controller/service.go: the stable prefix first,
# the deprecated one after); the speaker announces whatever status.loadBalancer.ingress holds.
_POOL_ANNOTATIONS = ("metallb.io/address-pool", "metallb.universe.tf/address-pool")
_IPS_ANNOTATIONS = ("metallb.io/loadBalancerIPs", "metallb.universe.tf/loadBalancerIPs")
# The labels of MetalLB's speaker pods: its manifests' (config/manifests/metallb-native.yaml: app, component) and
# its Helm chart's (charts/metallb/templates/speaker.yaml).
_SPEAKER_LABELS = (
    {"app": "metallb", "component": "speaker"},
    {"app.kubernetes.io/name": "metallb", "app.kubernetes.io/component": "speaker"},
)
_GLOBAL_LEASE = "plndr-svcs-lock"  # kube-vip's default services lease (cmd/kube-vip.go)
_LEASE_ANNOTATION = "kube-vip.io/leaseName"  # a Service's own lease, NAME or NAMESPACE/NAME (pkg/lease/lease.go)
_KUBE_VIP_ENV = ("vip_arp", "svc_enable", "cp_enable", "bgp_enable", "svc_election", "vip_interface")
_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # strconv.ParseBool
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_NETWORK_UNAVAILABLE = "NetworkUnavailable"
_L2_FIELDS = ("ipAddressPools", "ipAddressPoolSelectors", "nodeSelectors", "interfaces", "serviceSelectors")
_BGP_FIELDS = ("ipAddressPools", "ipAddressPoolSelectors", "nodeSelectors", "serviceSelectors")

_LB_NAMES = {"metallb": "metallb", "kube-vip": "kube-vip", "assumed": "layer2"}

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Pool:
    obj: Obj
    networks: tuple[IPNet, ...]

    def holds(self, ip: str) -> bool:
        address = ipaddress.ip_address(ip)
        return any(address in net for net in self.networks)


@dataclass(frozen=True)
class Advertisement:
    obj: Obj
    mode: str  # layer2 or bgp
    pools: frozenset[str] | None  # the pools it takes by name or selector; None: every pool
    nodes: frozenset[str]  # the nodes its nodeSelectors take (every node without one)

    def serves(self, svc: Service) -> bool:
        """serviceSelectors: none, or one selecting the Service's labels (l2AdsForService, bgpAdsForService)."""
        selectors = self.obj.each(("spec", "serviceSelectors"))
        labels = svc.obj.get(("metadata", "labels"), dict, {})
        return not selectors or any(selects(self.obj, p, labels) for p, _ in selectors)


@dataclass(frozen=True)
class KubeVip:
    obj: Obj
    mode: str  # layer2 (vip_arp), bgp (bgp_enable) or "" (neither: a mode the lab does not model)
    election: bool  # svc_election: a leader per Service; else one leader for every Service
    nodes: frozenset[str]  # where it runs
    lease: str  # the lease of the one leader for every Service (svc_leasename), in its namespace


@dataclass
class Announcers:
    """What the input says announces LoadBalancer addresses."""

    pools: dict[str, Pool] = field(default_factory=dict)
    ads: list[Advertisement] = field(default_factory=list)
    speakers: frozenset[str] | None = None  # the nodes MetalLB's speaker pods run on; None: not in the input
    kube_vip: KubeVip | None = None
    leases: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, name): holderIdentity


@dataclass
class Announced:
    """The scenario's parts for announced addresses: layer 2 load balancers, and the client's routes (BGP)."""

    balancers: list[dict[str, Any]] = field(default_factory=list)
    routes: list[dict[str, Any]] = field(default_factory=list)


def read_announcers(inputs: Inputs, nodes: dict[str, Node], notes: list[str]) -> Announcers:
    found = Announcers()
    for obj in inputs.objects[POOL]:
        pool = _pool(obj)
        if obj.name in found.pools:
            raise obj.error(("metadata", "name"), "a second IPAddressPool of this name: give one MetalLB's objects")
        found.pools[obj.name] = pool
    found.ads = [_advertisement(obj, found.pools, nodes, notes) for obj in inputs.objects[L2] + inputs.objects[BGP]]
    speakers = [o for o in inputs.objects["Pod"] if _is_speaker(o)]
    if speakers:
        found.speakers = frozenset(o.get(("spec", "nodeName"), str, "") for o in speakers if _running(o))
    found.kube_vip = _kube_vip(inputs, nodes, notes)
    found.leases = {(o.namespace, o.name): o.get(("spec", "holderIdentity"), str, "") for o in inputs.objects["Lease"]}
    return found


def _pool(obj: Obj) -> Pool:
    _metallb_api(obj)
    obj.get(("spec", "autoAssign"), bool)  # allocation only: true or false, or an error naming it
    obj.get(("spec", "avoidBuggyIPs"), bool)
    listed = obj.each(("spec", "addresses"))
    if not listed:
        raise obj.error(("spec", "addresses"), "missing: expected a list of CIDRs or first-last ranges")
    return Pool(obj, tuple(net for path, value in listed for net in _pool_range(obj, path, value)))


def _pool_range(obj: Obj, path: FieldPath, value: Any) -> list[IPNet]:
    """A CIDR (host bits allowed, as Go's net.ParseCIDR takes them) or FIRST-LAST (space around each allowed)."""
    if not isinstance(value, str):
        raise obj.error(path, f"expected a CIDR or a first-last range as text, got {value!r}")
    try:
        if "-" not in value:
            if not is_ascii_number(value.partition("/")[2]):
                raise ValueError("a CIDR ends in /PREFIX-LENGTH")  # net.ParseCIDR takes no bare address or mask
            return [ipaddress.ip_network(value, strict=False)]
        first, last = (ipaddress.ip_address(part.strip()) for part in value.split("-", 1))
        if first.version != last.version or first > last:
            raise ValueError("the first address must be of the last one's family, and not after it")
        return list(ipaddress.summarize_address_range(first, last))  # type: ignore[arg-type]
    except ValueError as exc:
        expected = "expected a CIDR (192.168.1.240/28) or a range (192.168.1.240-192.168.1.250)"
        raise obj.error(path, f"{expected}: {exc}") from None


def _metallb_api(obj: Obj) -> None:
    api = obj.get(("apiVersion",), str, "")
    if api != METALLB_API:
        raise obj.error(("apiVersion",), f"expected {METALLB_API} (MetalLB's), got {api!r}")


def _advertisement(obj: Obj, pools: dict[str, Pool], nodes: dict[str, Node], notes: list[str]) -> Advertisement:
    _metallb_api(obj)
    mode, known = ("layer2", _L2_FIELDS) if obj.kind == L2 else ("bgp", _BGP_FIELDS)
    for key in obj.get(("spec",), dict, {}):
        if key not in known:
            notes.append(obj.note(("spec", key), "not modelled: the lab announces as if it were left out"))
    named = [(p, obj.get(p, str)) for p, _ in obj.each(("spec", "ipAddressPools"))]
    for path, name in named:
        if pools and name not in pools:
            notes.append(obj.note(path, f"{name!r}: no IPAddressPool of the input has this name"))
    chosen = {name for _, name in named}
    pool_selectors = obj.each(("spec", "ipAddressPoolSelectors"))
    for path, _ in pool_selectors:
        chosen |= {n for n, p in pools.items() if selects(obj, path, p.obj.get(("metadata", "labels"), dict, {}))}
    node_selectors = obj.each(("spec", "nodeSelectors"))
    taken = {n for n, node in nodes.items() if any(selects(obj, p, node.labels) for p, _ in node_selectors)}
    for path, _ in obj.each(("spec", "interfaces")):
        notes.append(
            obj.note(path, f"{obj.get(path, str)}: the lab's nodes have one link (eth0), taken to be this interface")
        )
    obj.each(("spec", "serviceSelectors"))  # a list, or an error naming it; each read where a Service is matched
    return Advertisement(
        obj,
        mode,
        frozenset(chosen) if named or pool_selectors else None,
        frozenset(taken) if node_selectors else frozenset(nodes),
    )


def _is_speaker(obj: Obj) -> bool:
    labels = obj.get(("metadata", "labels"), dict, {})
    return any(all(labels.get(k) == v for k, v in wanted.items()) for wanted in _SPEAKER_LABELS)


def _running(obj: Obj) -> bool:
    return obj.get(("status", "phase"), str, "") == "Running"


def _kube_vip(inputs: Inputs, nodes: dict[str, Node], notes: list[str]) -> KubeVip | None:
    """kube-vip serving Services: its pods (static pods or a DaemonSet's) where the input has them, else its
    DaemonSet, taken to run on every node its nodeSelector takes."""
    pods = [(o, ("spec",)) for o in inputs.objects["Pod"] if _running(o)]
    sets = [(o, ("spec", "template", "spec")) for o in inputs.objects["DaemonSet"]]
    found = [(o, spec, env) for o, spec in pods + sets if (env := _kube_vip_env(o, spec, notes)) is not None]
    serving = [(o, spec, env) for o, spec, env in found if env.get("svc_enable")]
    for obj, spec, env in found:
        if not env.get("svc_enable"):
            notes.append(obj.note(spec, "kube-vip without svc_enable: it announces no Service's address"))
    if not serving:
        return None
    obj, spec, env = serving[0]
    on_pods = {o.get(("spec", "nodeName"), str, "") for o, s, _ in serving if s == ("spec",)}
    if not on_pods:
        wanted = obj.get((*spec, "nodeSelector"), dict, {})
        on_pods = {n for n, node in nodes.items() if all(node.labels.get(k) == v for k, v in wanted.items())}
        notes.append(
            obj.note(spec, "kube-vip's pods are not in the input: taken to run on every node its nodeSelector takes")
        )
    mode = "bgp" if env.get("bgp_enable") else "layer2" if env.get("vip_arp") else ""
    lease = env.get("svc_leasename") or _GLOBAL_LEASE
    return KubeVip(obj, mode, bool(env.get("svc_election")), frozenset(on_pods), lease)


def _kube_vip_env(obj: Obj, spec: FieldPath, notes: list[str]) -> dict[str, Any] | None:
    """The kube-vip switches of the first container that sets any (None: not kube-vip), each read as kube-vip
    reads it (strconv.ParseBool; unset is false), and its services lease's name (svc_leasename)."""
    for cpath, _ in obj.each((*spec, "containers")):
        env = obj.each((*cpath, "env"))
        names = {obj.get((*p, "name"), str, ""): p for p, _ in env}
        if not any(k in names for k in _KUBE_VIP_ENV):
            continue
        found: dict[str, Any] = {
            k: _env_bool(obj, names[k], notes)
            for k in ("vip_arp", "svc_enable", "bgp_enable", "svc_election")
            if k in names
        }
        if "svc_leasename" in names:
            found["svc_leasename"] = obj.get((*names["svc_leasename"], "value"), str, "")
        return found
    return None


def _env_bool(obj: Obj, path: FieldPath, notes: list[str]) -> bool:
    if obj.get((*path, "valueFrom"), dict) is not None:
        notes.append(obj.note((*path, "valueFrom"), "set from another object: not read, taken as false"))
        return False
    value = obj.get((*path, "value"), str, "")
    if value not in (*_TRUE, *_FALSE, ""):
        raise obj.error((*path, "value"), f"expected true or false (as kube-vip reads it), got {value!r}")
    return value in _TRUE


def announce(
    found: Announcers,
    services: Iterable[Service],
    nodes: dict[str, Node],
    wanted: list[str],
    underlays: dict[Family, str],
    names: Names,
    notes: list[str],
) -> Announced:
    """The scenario's layer 2 load balancers and BGP routes for the Services' load balancer addresses (ipMode VIP);
    an address the lab cannot announce is left out of its Service, said."""
    out = Announced()
    groups: dict[tuple[str, frozenset[str], str], list[str]] = {}
    claimed: dict[str, str] = {}  # each address announced, with its Service
    for svc in services:
        if svc.type != "LoadBalancer" or not _vips(svc):
            continue
        _say_annotations(svc, found, notes)
        how, allowed, why = _announcer(svc, found, nodes)
        pinned = ""
        if how == "kube-vip":
            pinned, said = _leader(svc, found, allowed, wanted)
            why = f"{why}; {said}"
        in_link = any(_inside(v, underlays) for v in _vips(svc))
        for vip in _vips(svc):
            problem = _unannounceable(vip, how, _inside(vip, underlays), in_link, underlays)
            if vip in claimed and (in_link or how == "bgp"):
                problem = f"{claimed[vip]} has it too (MetalLB's allow-shared-ip): the lab announces it for one Service"
            if problem:
                notes.append(svc.obj.note(("status", "loadBalancer"), f"{vip}: left out, with its probes: {problem}"))
                _drop(svc, vip)
        kept = _vips(svc)
        ref = f"{names.namespace(svc.namespace)}/{names.service(svc.namespace, svc.name)}"
        if not kept:
            continue
        claimed |= {v: svc.key for v in kept}
        if how == "bgp":
            speakers = _ready_on(svc, allowed)
            notes.append(svc.obj.note(("status", "loadBalancer"), f"{why}; {_bgp_said(speakers)}"))
            via = [names.node(n) for n in wanted if n in speakers]
            out.routes += [{"to": f"{v}/32", "via": via} for v in kept if via]
        elif not in_link:
            notes.append(svc.obj.note(("status", "loadBalancer"), f"{why}; {ROUTED}" if how == "none" else ROUTED))
        elif how == "none":
            notes.append(svc.obj.note(("status", "loadBalancer"), why))
        elif not allowed & set(wanted):
            notes.append(svc.obj.note(("status", "loadBalancer"), f"{why}; {_nobody(allowed)}"))
        else:
            groups.setdefault((how, allowed, pinned), []).append(ref)
            notes.append(svc.obj.note(("status", "loadBalancer"), f"{why}; {_layer2_said(allowed, wanted)}"))
    out.balancers = _balancers(groups, wanted, names)
    return out


def _vips(svc: Service) -> list[str]:
    # status.loadBalancer.ingress alone: a spec.loadBalancerIP the status does not hold is left out when the Service
    # is read (services.py), as kube-proxy programs only the status.
    return [i["ip"] for i in svc.ingress if i["ipMode"] == "VIP"]


def _drop(svc: Service, vip: str) -> None:
    svc.ingress[:] = [i for i in svc.ingress if i["ip"] != vip]


def _inside(vip: str, underlays: dict[Family, str]) -> bool:
    family = family_of(vip)
    return family in underlays and ipaddress.ip_address(vip) in ipaddress.ip_network(underlays[family])


def _announcer(svc: Service, found: Announcers, nodes: dict[str, Node]) -> tuple[str, frozenset[str], str]:
    """How the Service's addresses are announced (metallb, kube-vip, bgp, none or assumed), by which nodes,
    and the words saying so."""
    vips = _vips(svc)
    pool = next((n for n, p in found.pools.items() if all(p.holds(v) for v in vips)), None)
    if pool is not None:
        return _metallb(svc, pool, found, nodes)
    if (kv := found.kube_vip) is not None and kv.mode:
        leader = "a leader elected per Service (svc_election)" if kv.election else "one leader for every Service"
        how = "kube-vip: " + ("ARP (vip_arp)" if kv.mode == "layer2" else "BGP (bgp_enable)")
        said = f"announced by {how}, {leader} among the nodes it runs on"
        return ("kube-vip" if kv.mode == "layer2" else "bgp"), kv.nodes & set(nodes), said
    said = "no MetalLB pool" + (" of the input" if found.pools else "") + " holds it and no kube-vip serves Services"
    return (
        "assumed",
        _usable(nodes),
        (
            f"{said}: taken to be announced in layer 2 as MetalLB does (a speaker on every node; for "
            "externalTrafficPolicy Local only a node with a ready endpoint){_skipped(nodes)}; if another announcer "
            "serves it, set the load balancer's `announcer` or `nodes`"
        ),
    )


def _metallb(svc: Service, pool: str, found: Announcers, nodes: dict[str, Node]) -> tuple[str, frozenset[str], str]:
    ads = [a for a in found.ads if (a.pools is None or pool in a.pools) and a.serves(svc)]
    layer2 = [a for a in ads if a.mode == "layer2"]
    chosen = layer2 or [a for a in ads if a.mode == "bgp"]
    if not chosen:
        return (
            "none",
            frozenset(),
            (
                f"MetalLB's pool {pool} holds it, but no L2Advertisement or BGPAdvertisement of the input takes "
                "the pool and the Service: MetalLB assigns the address and announces it nowhere, so nobody answers "
                "for it on the nodes' link"
            ),
        )
    allowed = frozenset().union(*(a.nodes for a in chosen)) & _usable(nodes)
    speakers = "" if found.speakers is None else " with a speaker pod running"
    if found.speakers is not None:
        allowed &= found.speakers
    kinds = " and ".join(sorted({f"{a.obj.kind} {a.obj.name}" for a in chosen}))
    said = f"MetalLB's pool {pool}, announced by {kinds} from the nodes they select{speakers}{_skipped(nodes)}"
    if found.speakers is None:
        said += " (no speaker pod in the input: taken to run on every node)"
    if layer2 and any(a.mode == "bgp" for a in ads):
        said += "; a BGPAdvertisement takes it too: the lab's client is on the nodes' link and asks ARP for it"
    return ("metallb" if layer2 else "bgp"), allowed, said


def _usable(nodes: dict[str, Node]) -> frozenset[str]:
    """The nodes a speaker may announce from: not labelled to be excluded from load balancers, nor with the
    NetworkUnavailable condition True (speakersForAds; bgpController.ShouldAnnounce)."""
    return frozenset(n for n, node in nodes.items() if EXCLUDE_LABEL not in node.labels and not _cut_off(node.obj))


def _skipped(nodes: dict[str, Node]) -> str:
    """The nodes MetalLB's speakers never announce from, said (words to append)."""
    skipped = [n for n in nodes if n not in _usable(nodes)]
    if not skipped:
        return ""
    return f", skipping {', '.join(skipped)} (labelled {EXCLUDE_LABEL} or NetworkUnavailable)"


def _cut_off(obj: Obj) -> bool:
    return any(
        obj.get((*p, "type"), str, "") == _NETWORK_UNAVAILABLE and obj.get((*p, "status"), str, "") == "True"
        for p, _ in obj.each(("status", "conditions"))
    )


def _unannounceable(vip: str, how: str, inside: bool, in_link: bool, underlays: dict[Family, str]) -> str | None:
    """Why the lab cannot reproduce how `vip` is announced (None when it can); `in_link`: whether any address of
    its Service lies in the nodes' network (a layer 2 load balancer takes only those)."""
    if family_of(vip) == "IPv6" and (inside or how == "bgp"):
        means = "by BGP" if how == "bgp" else "by NDP (the IPv6 ARP)"
        return f"an IPv6 load balancer address is announced {means}, which the lab does not model yet (IPv4 only)"
    if how == "bgp" and len(underlays) > 1:
        return "the lab's BGP peer (the client, with a route to it over each announcing node) is IPv4-only"
    if how not in ("bgp", "none") and in_link and not inside:
        return "outside the nodes' network, where the Service's other address is announced in layer 2 on it"
    return None


def _ready_on(svc: Service, allowed: frozenset[str]) -> frozenset[str]:
    """The nodes that announce a BGP address: every allowed one while the Service has a ready endpoint; for
    externalTrafficPolicy Local only those with a ready local endpoint (bgpController.ShouldAnnounce)."""
    ready = {ep.node for s in svc.slices for ep in s.endpoints if ep.conditions.get("ready", True)}
    if not ready:
        return frozenset()
    return allowed & ready if svc.spec.get("externalTrafficPolicy") == "Local" else allowed


def _bgp_said(speakers: frozenset[str]) -> str:
    if not speakers:
        return "no node announces it (no ready endpoint, or none on an announcing node for Local): no route to it"
    return f"the client, standing in for the BGP peer, routes it over {', '.join(sorted(speakers))} (multipath)"


def _leader(svc: Service, found: Announcers, allowed: frozenset[str], wanted: list[str]) -> tuple[str, str]:
    """The node kube-vip's lease names as the Service's leader (pinned as the load balancer's `announcer`, "" when
    the input holds no such lease or the lab cannot make its holder announce), and the words saying so."""
    assert found.kube_vip is not None
    lease = _lease_of(svc, found.kube_vip)
    holder = found.leases.get(lease)
    where = f"kube-vip's lease {lease[0]}/{lease[1]}"
    if holder is None:
        return "", f"{where} is not in the input: the lab elects as MetalLB does (kubectl get leases -A gives it)"
    if holder in wanted and holder in _ready_on(svc, allowed):
        return holder, f"{where} is held by {holder}: it announces (`announcer`)"
    return "", (
        f"{where} is held by {holder!r}, which the lab cannot make announce (not an imported node where kube-vip "
        "runs, or without a ready endpoint the Service's policy needs there): the lab elects as MetalLB does"
    )


def _lease_of(svc: Service, kv: KubeVip) -> tuple[str, str]:
    """The lease electing the Service's leader: its own with svc_election (kube-vip.io/leaseName, else
    kubevip-NAME in its namespace: ServiceName in pkg/lease/lease.go), else the one leader's (svc_leasename)."""
    if not kv.election:
        return kv.obj.namespace or "kube-system", kv.lease
    named = svc.obj.get(("metadata", "annotations", _LEASE_ANNOTATION), str, "") or f"kubevip-{svc.name}"
    parts = named.split("/")
    return (parts[0], parts[1]) if len(parts) > 1 else (svc.namespace, named)


def _nobody(allowed: frozenset[str]) -> str:
    if not allowed:
        return "no node may announce it, so nobody answers ARP for it, in the cluster as in the lab"
    return (
        f"the nodes that may announce it ({', '.join(sorted(allowed))}) are not imported (--service): nobody answers "
        "ARP for it in the lab; import without --service to reproduce its announcement"
    )


def _layer2_said(allowed: frozenset[str], wanted: list[str]) -> str:
    left = sorted(allowed - set(wanted))
    said = f"a layer 2 load balancer elects its speaker among {', '.join(n for n in wanted if n in allowed) or 'none'}"
    if left:
        said += f" (with --service, {', '.join(left)} are not imported: the cluster elects among them too)"
    return said


def _balancers(
    groups: dict[tuple[str, frozenset[str], str], list[str]], wanted: list[str], names: Names
) -> list[dict[str, Any]]:
    """A layer 2 load balancer per announcer, set of nodes allowed to announce (its `nodes`, written when some
    imported node may not) and node pinned to announce (kube-vip's lease holder)."""
    out: list[dict[str, Any]] = []
    for (how, allowed, pinned), refs in groups.items():
        source = _LB_NAMES[how]
        taken = sum(1 for b in out if b["name"].startswith(source))
        lb: dict[str, Any] = {
            "name": source if not taken else f"{source}-{taken + 1}",
            "mode": "layer2",
            "services": refs,
        }
        speakers = [names.node(n) for n in wanted if n in allowed]
        if len(speakers) < len(wanted):
            lb["nodes"] = speakers
        if pinned:
            lb["announcer"] = names.node(pinned)
        out.append(lb)
    return out


def _say_annotations(svc: Service, found: Announcers, notes: list[str]) -> None:
    """MetalLB's allocation annotations: what the controller asked for, said where the assigned address differs."""
    annotations = svc.obj.get(("metadata", "annotations"), dict, {})
    for key in _POOL_ANNOTATIONS:
        if key in annotations:
            name = svc.obj.get(("metadata", "annotations", key), str)
            pool = found.pools.get(name)
            if pool is not None and not all(pool.holds(v) for v in _vips(svc)):
                notes.append(
                    svc.obj.note(
                        ("metadata", "annotations", key),
                        f"{name}: the Service's load balancer "
                        "address is not in this pool: announced as the pool holding it says",
                    )
                )
            break
    for key in _IPS_ANNOTATIONS:
        if key in annotations:
            asked = {a.strip() for a in svc.obj.get(("metadata", "annotations", key), str).split(",")}
            if asked != set(_vips(svc)):
                notes.append(
                    svc.obj.note(
                        ("metadata", "annotations", key),
                        "differs from status.loadBalancer."
                        "ingress: the address MetalLB assigned (the status) is announced",
                    )
                )
            break
