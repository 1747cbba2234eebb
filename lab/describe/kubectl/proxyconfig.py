"""kube-proxy's configuration (the KubeProxyConfiguration in its ConfigMap's data["config.conf"]) and its release,
as a scenario's `cluster` fields, and a note for every field the lab does not reproduce.

Field names are kube-proxy's config API of the release (proxyfields.py: every field of each release, 1.19 to
1.37; nodePortAddresses' keywords primary, localhost and all); durations are Go's (`1h0m0s`, `30s`: time.ParseDuration,
whose value is a whole number of nanoseconds below 2^63), and the checks of a value are kube-proxy's own validation's
(kubernetes/kubernetes at 01593144e663c2a7721eb19bf55e53e784a64fbb, pkg/proxy/apis/config/validation/validation.go:
nodePortAddresses and clusterCIDR are CIDRs, net.ParseCIDR; conntrack and ipvs timeouts are not negative), for
kube-proxy refuses to start with a configuration that fails it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lab.describe.ip import AddressError, Network, parse_network
from lab.describe.kubectl.objects import Obj, embedded
from lab.describe.kubectl.proxyfields import check_fields, paths
from lab.describe.releases import (
    FEATURE_GATES_SINCE,
    check_feature_gate,
    check_node_port_addresses,
    check_option,
)
from lab.describe.schema import NODE_PORT_KEYWORDS
from lab.describe.yamlsrc import FieldPath

# Fields that set how kube-proxy runs (addresses it listens on, its API client, logs, timers), not which rules
# it writes: read, and named together on one line.
_PROCESS = [
    "apiVersion",
    "kind",
    "bindAddress",
    "bindAddressHardFail",
    "clientConnection",
    "configSyncPeriod",
    "enableProfiling",
    "healthzBindAddress",
    "hostnameOverride",
    "logging",
    "metricsBindAddress",
    "oomScoreAdj",
    "portRange",
    "showHiddenMetricsForVersion",
    "winkernel",
    "windowsRunAsService",
]
# Fields read above, each with its own note where the lab leaves it out (a section: every field of it).
_READ = (
    "mode",
    "clusterCIDR",
    "detectLocalMode",
    "detectLocal",
    "nodePortAddresses",
    "featureGates",
    "conntrack",
    "iptables.masqueradeAll",
    "iptables.masqueradeBit",
    "iptables.localhostNodePorts",
    "nftables.masqueradeAll",
    "nftables.masqueradeBit",
    "ipvs.scheduler",
    "ipvs.strictARP",
    "ipvs.excludeCIDRs",
    "ipvs.tcpTimeout",
    "ipvs.tcpFinTimeout",
    "ipvs.udpTimeout",
)
_CONFIG_KEYS = ("config.conf", "config")
_TIMERS = tuple((section, t) for section in ("iptables", "ipvs", "nftables") for t in ("syncPeriod", "minSyncPeriod"))
_DEFAULT_TIMEOUTS = {"tcpEstablishedTimeout": 86400, "tcpCloseWaitTimeout": 3600}  # what the lab writes
# Go's time.ParseDuration: a sign, then numbers (ASCII digits, a fraction) each with a unit; nanoseconds per unit.
_DURATION = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")
_NS = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,  # micro sign
    "\u03bcs": 10**3,  # Greek mu
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_MOST_NS = 2**63  # a Go Duration is an int64 of nanoseconds: -2^63 to 2^63 - 1
_FRACTION_DIGITS = 18  # Go ignores the digits of a fraction past what an int64 holds
# A release as kubectl or a node prints it: v1.MINOR.PATCH, then semver's pre-release and build (ASCII only; a
# minor of four digits or more is no release of this century).
_RELEASE = re.compile(r"v?1\.(0|[1-9][0-9]{0,2})(?:\.[0-9]+)?(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?", re.ASCII)
GIT_VERSION = ("serverVersion", "gitVersion")
_LONGEST_UDP_TIMEOUT = 86400  # seconds: the most a scenario's conntrack.udpTimeout takes (describe's schema)


@dataclass
class ProxyConfig:
    """What the configuration sets in the scenario's `cluster`, and what it sets that the lab leaves out."""

    cluster: dict[str, Any] = field(default_factory=dict)
    cluster_cidrs: dict[str, str] = field(default_factory=dict)  # the clusterCIDR kube-proxy was given, per family
    notes: list[str] = field(default_factory=list)
    conf: Obj | None = None  # the KubeProxyConfiguration read, for notes about it made later

    def note(self, path: tuple[str, ...], text: str) -> str:
        """A note about a field of the configuration (file, line, object); a bare one without a configuration."""
        return self.conf.note(path, text) if self.conf is not None else f"lab import: {text}"


def config_key(obj: Obj) -> str | None:
    """The key of a ConfigMap's data that holds a KubeProxyConfiguration: config.conf (kubeadm's kube-proxy), config
    (EKS's kube-proxy-config), None when none does."""
    data = obj.get(("data",), dict, {})
    return next((k for k in _CONFIG_KEYS if isinstance(data.get(k), str) and "KubeProxyConfiguration" in data[k]), None)


def kube_proxy_config(obj: Obj, version: str) -> ProxyConfig:
    """The ConfigMap's (or a bare KubeProxyConfiguration's) settings for kube-proxy `version`."""
    conf = embedded(obj, ("data", config_key(obj) or "config.conf")) if obj.kind == "ConfigMap" else obj
    out = ProxyConfig(conf=conf)
    skipped = set()
    for finding in check_fields(conf.data, int(version.split(".")[1])):
        if finding.refused:
            raise conf.error(finding.path, finding.text)
        out.notes.append(conf.note(finding.path, finding.text))
        skipped.add(finding.path)
    _mode(conf, out)
    _cluster_cidr(conf, out)
    _detect_local(conf, out)
    _node_port_addresses(conf, out, version)
    _masquerade(conf, out, version)
    _ipvs(conf, out)
    _conntrack(conf, out, version)
    _feature_gates(conf, out, version)
    if unmodelled := _not_modelled(conf, skipped):
        out.notes.append(conf.note((), f"set, not modelled (the lab does not reproduce them): {', '.join(unmodelled)}"))
    process = [k for k in _PROCESS if _set(conf.data.get(k)) and k not in ("apiVersion", "kind")]
    process += [".".join(path) for path in _TIMERS if _set(conf.get(path, str))]
    if process:
        out.notes.append(conf.note((), f"read, no effect on the rules the lab installs: {', '.join(process)}"))
    return out


def _feature_gates(conf: Obj, out: ProxyConfig, version: str) -> None:
    """The gates the lab models are written (where the release knows them); every other one is said."""
    modelled = {}
    for gate, value in conf.get(("featureGates",), dict, {}).items():
        path = ("featureGates", gate)
        if not isinstance(value, bool):
            raise conf.error(path, f"expected true or false, got {value!r}")
        if gate not in FEATURE_GATES_SINCE:
            out.notes.append(
                conf.note(path, f"{str(value).lower()}: not modelled; the lab follows {version}'s defaults")
            )
        elif problem := check_feature_gate(version, gate):
            out.notes.append(conf.note(path, f"{problem}: left out"))
        else:
            modelled[gate] = value
    if modelled:
        out.cluster["featureGates"] = modelled


def _mode(conf: Obj, out: ProxyConfig) -> None:
    mode = conf.get(("mode",), str, "") or "iptables"  # kube-proxy's default on Linux
    if mode not in ("iptables", "ipvs", "nftables"):
        raise conf.error(("mode",), f"expected iptables, ipvs or nftables (what the lab reproduces), got {mode!r}")
    out.cluster["proxyMode"] = mode


def _cluster_cidr(conf: Obj, out: ProxyConfig) -> None:
    """kube-proxy's --cluster-cidr: one network per family, the primary first (dual-stack: "v4,v6" or "v6,v4")."""
    text = conf.get(("clusterCIDR",), str, "")
    for cidr in filter(None, (c.strip() for c in text.split(","))):
        net = _network(conf, ("clusterCIDR",), cidr)
        out.cluster_cidrs.setdefault(f"IPv{net.version}", str(net))
    out.cluster["kubeProxyClusterCIDR"] = bool(out.cluster_cidrs)


def _detect_local(conf: Obj, out: ProxyConfig) -> None:
    mode = conf.get(("detectLocalMode",), str, "")
    if mode not in ("", "ClusterCIDR"):
        out.notes.append(
            conf.note(
                ("detectLocalMode",),
                f"{mode}: not modelled; the lab detects local traffic by "
                "clusterCIDR (kube-proxy's default), or not at all without one",
            )
        )
    for key, value in conf.get(("detectLocal",), dict, {}).items():
        if value:
            out.notes.append(conf.note(("detectLocal", key), f"{value!r}: not modelled"))


def _node_port_addresses(conf: Obj, out: ProxyConfig, version: str) -> None:
    kept = []
    for path, value in conf.each(("nodePortAddresses",)):
        if not isinstance(value, str):
            raise conf.error(path, f"expected a CIDR or a keyword, got {value!r}")
        if value in NODE_PORT_KEYWORDS:
            kept.append(value)
            continue
        # Either family is kept: each proxier takes its own family's CIDRs, and one left none serves everywhere.
        kept.append(str(_network(conf, path, value)))
    if problem := check_node_port_addresses(version, kept, NODE_PORT_KEYWORDS):
        out.notes.append(conf.note(("nodePortAddresses",), f"{problem}: left out, kube-proxy's default taken"))
    elif kept:
        out.cluster["nodePortAddresses"] = kept


def _masquerade(conf: Obj, out: ProxyConfig, version: str) -> None:
    if any(conf.get((s, "masqueradeAll"), bool, False) for s in ("iptables", "nftables")):
        out.cluster["masqueradeAll"] = True
    # nftables mode marks by nftables.masqueradeBit, iptables and ipvs mode by iptables.masqueradeBit (the bit kube-
    # proxy's server.go hands each mode's NewDualStackProxier).
    used = "nftables" if out.cluster.get("proxyMode") == "nftables" else "iptables"
    for section in ("iptables", "nftables"):
        path = (section, "masqueradeBit")
        bit = conf.get(path, int)
        if bit is not None and not 0 <= bit <= 31:
            raise conf.error(path, f"{bit}: must be within the range [0, 31] (kube-proxy's validation refuses it)")
        if bit in (None, 14):
            continue
        if section == used:
            out.cluster["masqueradeBit"] = bit
        else:
            out.notes.append(
                conf.note(
                    path, f"{bit}: no effect in {out.cluster['proxyMode']} mode, which marks by {used}.masqueradeBit"
                )
            )
    if conf.get(("iptables", "localhostNodePorts"), bool, True) is False:
        if problem := check_option(version, ("iptables", "localhostNodePorts")):
            out.notes.append(conf.note(("iptables", "localhostNodePorts"), f"{problem}: left out"))
        else:
            out.cluster["iptables"] = {"localhostNodePorts": False}


def _ipvs(conf: Obj, out: ProxyConfig) -> None:
    ipvs: dict[str, Any] = {}
    scheduler = conf.get(("ipvs", "scheduler"), str, "")
    if scheduler:
        ipvs["scheduler"] = scheduler
    if conf.get(("ipvs", "strictARP"), bool, False):
        ipvs["strictARP"] = True
    if ipvs:
        out.cluster["ipvs"] = ipvs
    if conf.get(("ipvs", "excludeCIDRs"), list, []):
        out.notes.append(conf.note(("ipvs", "excludeCIDRs"), "not modelled"))
    for key in ("tcpTimeout", "tcpFinTimeout", "udpTimeout"):
        if _seconds(conf, ("ipvs", key)):
            out.notes.append(conf.note(("ipvs", key), "not modelled: the lab keeps ip_vs' own timeouts"))


def _conntrack(conf: Obj, out: ProxyConfig, version: str) -> None:
    conntrack: dict[str, Any] = {}
    if conf.get(("conntrack", "tcpBeLiberal"), bool, False):
        conntrack["tcpBeLiberal"] = True
    for key in ("udpTimeout", "udpStreamTimeout"):
        if (seconds := _seconds(conf, ("conntrack", key))) and seconds > _LONGEST_UDP_TIMEOUT:
            said = f"{seconds:.0f} s: longer than the lab sets ({_LONGEST_UDP_TIMEOUT} s at most): left out"
            out.notes.append(conf.note(("conntrack", key), said))
        elif seconds:
            conntrack[key] = max(1, round(seconds))
    for key in list(conntrack):
        if problem := check_option(version, ("conntrack", key)):
            out.notes.append(conf.note(("conntrack", key), f"{problem}: left out"))
            del conntrack[key]
    if conntrack:
        out.cluster["conntrack"] = conntrack
    for key, default in _DEFAULT_TIMEOUTS.items():
        value = _seconds(conf, ("conntrack", key))
        if value not in (None, 0, default):
            out.notes.append(
                conf.note(("conntrack", key), f"not modelled: the lab writes kube-proxy's default {default} s")
            )
    for key in ("maxPerCore", "min"):
        if conf.get(("conntrack", key), int):
            out.notes.append(conf.note(("conntrack", key), "not modelled: nf_conntrack_max is the host's, left alone"))


def _not_modelled(conf: Obj, skipped: set[tuple[str, ...]]) -> list[str]:
    """The fields set that nothing above reads or says (a field of Windows' kube-proxy, userspace mode's), each
    once."""
    found = []
    for path in paths():
        dotted = ".".join(path)
        if path in (*skipped, *_TIMERS) or path[0] in (*_READ, *_PROCESS) or dotted in _READ:
            continue
        if _set(_value(conf.data, path)):
            found.append(dotted)
    return found


def _value(data: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _set(value: Any) -> bool:
    """Whether a field holds anything but its empty value ("", 0, "0s", null, or a mapping of such)."""
    if isinstance(value, dict):
        return any(_set(v) for v in value.values())
    return value not in (None, "", 0, "0s", False, [])


def release(text: str) -> str | None:
    """1.MINOR of a version as kubectl or a node prints it ("v1.31.2", "v1.29.3-eks-adc7111"), else None."""
    match = _RELEASE.fullmatch(text)
    return f"1.{match.group(1)}" if match else None


def version_of(obj: Obj) -> str:
    """The release of `kubectl version -o yaml`'s server."""
    found = release_at(obj, GIT_VERSION)
    if found is None:
        raise obj.error(GIT_VERSION, "missing: kubectl version printed no server (no cluster?)")
    return found


def release_at(obj: Obj, path: FieldPath) -> str | None:
    """The release a version field names, None when it is missing or empty; refused when it is no version."""
    text = obj.get(path, str, "")
    if not text:
        return None
    if (found := release(text)) is None:
        raise obj.error(path, f"expected a version such as v1.31.2, got {text[:60]!r}")
    return found


def _seconds(obj: Obj, path: FieldPath) -> float | None:
    """A timeout: a Go duration, not negative (kube-proxy's validation refuses one that is)."""
    text = obj.get(path, str)
    if text is None:
        return None
    ns = go_duration(text)
    if ns is None:
        raise obj.error(
            path,
            f"expected a duration such as 1h0m0s or 30s (Go's: at most 2562047h47m16s), got {text[:60]!r}",
        )
    if ns < 0:
        raise obj.error(path, f"{text}: a timeout is not negative (kube-proxy refuses to start)")
    return ns / 10**9


def go_duration(text: str) -> int | None:
    """The nanoseconds of a duration as Go's time.ParseDuration reads it, None where it refuses it (not a duration,
    an unknown unit, beyond an int64 of nanoseconds)."""
    sign = -1 if text[:1] == "-" else 1
    body = text[1:] if text[:1] in ("-", "+") else text
    if body == "0":
        return 0
    if not body:
        return None
    total, at = 0, 0
    while at < len(body):
        match = _DURATION.match(body, at)
        whole, fraction, unit = match.group(1).lstrip("0"), match.group(2) or "", match.group(3)
        if not match.group(1) and not fraction or unit not in _NS or len(whole) > 19:
            return None
        fraction = fraction[:_FRACTION_DIGITS]
        total += int(whole or "0") * _NS[unit] + int(fraction or "0") * _NS[unit] // 10 ** len(fraction)
        if total > _MOST_NS:
            return None
        at = match.end()
    return sign * total if sign < 0 or total < _MOST_NS else None


def _network(obj: Obj, path: FieldPath, text: str) -> Network:
    """A CIDR as kube-proxy's validation reads one (ParseCIDRSloppy: lab/describe/ip.py), with its prefix length:
    Python would take an address without one as a /32, which kube-proxy refuses."""
    try:
        return parse_network(text)
    except AddressError as exc:
        raise obj.error(path, str(exc)) from None
