"""Every field of kube-proxy's configuration file (kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration), by
release, so that a real ConfigMap of a release is read field for field, a field of a later release is refused
naming the release that brought it, and a misspelt one naming the closest real one.

Read from config/v1alpha1/types.go of kubernetes/kube-proxy (the published copy of kubernetes/kubernetes'
staging/src/k8s.io/kube-proxy) on each release branch, release-1.19 (0c13cbda3876d30a462f7db85aebff140682ccd4)
to release-1.36 (76267a869d183acb47c0ee53c19b277007858142), and master for 1.37
(d37b2e75a8dce477550045acb61b3e1074813321); 1.38 takes 1.37's fields (INFERRED: CHANGELOG-1.38.md, read up to
v1.38.0-alpha.2 at kubernetes/kubernetes@0411cc704533ed25a1bfc6e21a3195d9c6a2f0f2, names no change to them, and no
1.38 types.go is stored). Between 1.19 and 1.37 fields were added in 1.24, 1.26, 1.28, 1.29
and 1.31, and one removed in 1.26; each change below names its kubernetes/kube-proxy commit and the
kubernetes/kubernetes commit it copies. clientConnection's fields are k8s.io/component-base's
ClientConnectionConfiguration (kubernetes/component-base config/v1alpha1/types.go, the same at release-1.19,
fbf24dae27f3, and master, 349fbe06359c), logging's are its LoggingConfiguration (logs/api/v1/types.go at release-1.28,
47b6c5b21e6b03790281df7f6b385d17a23737e2): logging's own fields are checked, what is under them (options,
vmodule) is component-base's and not. No release branch of kubernetes/kube-proxy, nor master, has another version
than v1alpha1 (a v1alpha2 was begun in kubernetes/kubernetes, pkg/proxy/apis/config/v1alpha2 at 2ea45fc996ad, and
published in no release), so another apiVersion is refused.

kube-proxy itself is more lenient: a field it does not know fails its strict decoding, and it decodes again
leniently, logs "Using lenient decoding as strict decoding failed" and goes on without the field (kubernetes/
kubernetes at 008b3652959ca58af8be3fb5b6ecfe9ae7638282, cmd/kube-proxy/app/options.go, loadConfig). The import
refuses such a field all the same (a misspelling, or a ConfigMap of another release than the one reproduced), but
one a later release removed, which an upgraded cluster keeps in its ConfigMap, is said and skipped as kube-proxy
skips it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.describe.errors import did_you_mean

API_VERSION = "kubeproxy.config.k8s.io/v1alpha1"  # the only version of every release's kube-proxy repository
KIND = f"KubeProxyConfiguration ({API_VERSION})"


@dataclass(frozen=True)
class Change:
    first: int  # the minor number of the first release with the change
    commit: str  # kubernetes/kube-proxy's, then the kubernetes/kubernetes commit it copies


_DETECT_LOCAL = Change(24, "kube-proxy b85d3adcdd98, kubernetes 7d480d8ac8e3")
_WINKERNEL_HNS = Change(24, "kube-proxy c63cc549a909, kubernetes 78a507b25647")
_LOCALHOST_NODE_PORTS = Change(26, "kube-proxy f6ee56b50f08, kubernetes bef207003148")
_NO_USERSPACE = Change(26, "kube-proxy e326d8577e0c, kubernetes 7df6c0228883")  # the userspace proxier removed
_LOGGING = Change(28, "kube-proxy 0c73cd16c5f6, kubernetes 71ef0dafa72c")
_TCP_BE_LIBERAL = Change(29, "kube-proxy 4e217dd52079, kubernetes 9ae77364e959")
_UDP_TIMEOUTS = Change(29, "kube-proxy cc0bd3193ce1, kubernetes 15ae6cc1607e")
_NFTABLES = Change(29, "kube-proxy 4bb0515dddb9, kubernetes a70653143e92")
_WINDOWS_SERVICE = Change(31, "kube-proxy b72c24b835d6, kubernetes 7a6fec3ea764")


@dataclass(frozen=True)
class Field:
    added: Change | None = None  # None: in every release the lab reproduces
    removed: Change | None = None
    fields: Mapping[str, Field] | None = None  # a section's own fields (None: a value, or not checked inside)


_VALUE = Field()


def _section(*names: str, added: Change | None = None, **others: Field) -> Field:
    return Field(added, fields={**dict.fromkeys(names, _VALUE), **others})


_SYNC = ("syncPeriod", "minSyncPeriod")
SCHEMA = _section(
    "apiVersion",
    "kind",
    "featureGates",
    "hostnameOverride",
    "bindAddress",
    "healthzBindAddress",
    "metricsBindAddress",
    "bindAddressHardFail",
    "enableProfiling",
    "showHiddenMetricsForVersion",
    "mode",
    "detectLocalMode",
    "clusterCIDR",
    "nodePortAddresses",
    "oomScoreAdj",
    "configSyncPeriod",
    "portRange",
    clientConnection=_section("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"),
    logging=_section("format", "flushFrequency", "verbosity", "vmodule", "options", added=_LOGGING),
    iptables=_section("masqueradeBit", "masqueradeAll", *_SYNC, localhostNodePorts=Field(_LOCALHOST_NODE_PORTS)),
    ipvs=_section(*_SYNC, "scheduler", "excludeCIDRs", "strictARP", "tcpTimeout", "tcpFinTimeout", "udpTimeout"),
    nftables=_section("masqueradeBit", "masqueradeAll", *_SYNC, added=_NFTABLES),
    winkernel=_section(
        "networkName",
        "sourceVip",
        "enableDSR",
        rootHnsEndpointName=Field(_WINKERNEL_HNS),
        forwardHealthCheckVip=Field(_WINKERNEL_HNS),
    ),
    detectLocal=_section("bridgeInterface", "interfaceNamePrefix", added=_DETECT_LOCAL),
    conntrack=_section(
        "maxPerCore",
        "min",
        "tcpEstablishedTimeout",
        "tcpCloseWaitTimeout",
        tcpBeLiberal=Field(_TCP_BE_LIBERAL),
        udpTimeout=Field(_UDP_TIMEOUTS),
        udpStreamTimeout=Field(_UDP_TIMEOUTS),
    ),
    udpIdleTimeout=Field(removed=_NO_USERSPACE),
    windowsRunAsService=Field(_WINDOWS_SERVICE),
)


@dataclass(frozen=True)
class Finding:
    """A field of the file that kube-proxy of the release has not: `refused`, or (a field a later release
    removed, which kube-proxy skips as it decodes) said and left out."""

    path: tuple[str, ...]
    text: str
    refused: bool


def check_fields(data: Mapping[Any, Any], minor: int) -> list[Finding]:
    """Each field of a KubeProxyConfiguration document that kube-proxy 1.`minor` does not have, and an apiVersion
    it does not read."""
    version = data.get("apiVersion", API_VERSION)
    if version != API_VERSION:
        return [
            Finding(
                ("apiVersion",), f"kube-proxy reads {API_VERSION}, no other version, got {str(version)[:60]!r}", True
            )
        ]
    return list(_walk(data, SCHEMA, (), minor))


def _walk(data: Mapping[Any, Any], section: Field, path: tuple[str, ...], minor: int) -> Any:
    known = section.fields or {}
    for key, value in data.items():
        name = str(key)
        at = (*path, name)
        field = known.get(name)
        if field is None:
            where = f"{'.'.join(path)} of a {KIND}" if path else f"a {KIND}"
            yield Finding(at, f"not a field of {where}{did_you_mean(name, _present(known, minor))}", True)
        elif field.added is not None and minor < field.added.first:
            since = f"it came in 1.{field.added.first} ({field.added.commit})"
            yield Finding(at, f"kube-proxy 1.{minor} has no {'.'.join(at)}: {since}; is the release right?", True)
        elif field.removed is not None and minor >= field.removed.first:
            text = f"gone from kube-proxy in 1.{field.removed.first} ({field.removed.commit}): 1.{minor} skips it"
            yield Finding(at, text, False)
        elif field.fields is not None and isinstance(value, Mapping):
            yield from _walk(value, field, at, minor)


def _present(fields: Mapping[str, Field], minor: int) -> list[str]:
    """The names of a section's fields in kube-proxy 1.`minor`."""
    return [
        n
        for n, f in fields.items()
        if (f.added is None or f.added.first <= minor) and (f.removed is None or f.removed.first > minor)
    ]


def paths(section: Field = SCHEMA, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every value's path in the schema, in its order (sections' own fields, not the sections)."""
    out = []
    for name, field in (section.fields or {}).items():
        out += paths(field, (*path, name)) if field.fields is not None else [(*path, name)]
    return out
