"""The kube-proxy core of render: one version table whose every switch cites its change, asked by everything
that depends on the release, and one endpoint selection for every mode."""

from __future__ import annotations

import inspect
import re
from dataclasses import replace
from pathlib import Path

import pytest

from lab.render.kubeproxy.endpoints import categorize
from lab.render.kubeproxy.iptables import render_iptables
from lab.render.kubeproxy.ipvs import render_ipvs
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import Release
from lab.render.kubeproxy.view import ServiceView

LAB = Path(__file__).resolve().parents[2] / "lab"
# A pull request, a KEP, an issue, one of the vendored S-commits, or an honest "inferred".
CITATION = re.compile(r"#\d{5,6}|KEP-\d+|issue \d+|S1\.\d+|[Ii]nferred|INFERRED|see \w+")


def switches() -> list[str]:
    return [
        name
        for name, member in inspect.getmembers(Release)
        if not name.startswith("_") and name not in {"version", "era", "of", "minor"}
        and (isinstance(member, property) or inspect.isfunction(member))
    ]  # fmt: skip


@pytest.mark.parametrize("name", switches())
def test_every_switch_cites_its_change(name):
    member = getattr(Release, name)
    doc = (member.fget if isinstance(member, property) else member).__doc__ or ""
    assert CITATION.search(doc), f"Release.{name} does not say which change it follows: {doc!r}"


def test_nothing_else_compares_versions():
    """Only the version table reads the minor number: renderers, install and describe ask Release."""
    offenders = []
    for path in sorted(LAB.rglob("*.py")):
        if path == LAB / "render" / "kubeproxy" / "versions.py":
            continue
        text = path.read_text()
        for pattern in (r"\.minor\b", r"kube_version\.split", r"minor_of\("):
            offenders += [f"{path.relative_to(LAB)}: {pattern}" for _ in re.finditer(pattern, text)]
    assert offenders == []


def port(internal: str, external: str, *endpoints: Endpoint) -> ServicePort:
    return ServicePort(
        namespace="ns",
        name="web",
        port_name="",
        protocol="TCP",
        port=80,
        cluster_ip="172.30.0.10",
        node_port=30080,
        internal_policy=internal,  # type: ignore[arg-type]
        external_policy=external,  # type: ignore[arg-type]
        endpoints=endpoints,
    )


HERE = Endpoint("10.0.1.2", 8080, is_local=True)
THERE = Endpoint("10.0.2.2", 8080, is_local=False)


@pytest.mark.parametrize(
    ("external", "cluster"),
    [("Cluster", (HERE,)), ("Local", (HERE, THERE))],
)
def test_filter_endpoints_keeps_all_when_external_policy_is_local(external, cluster):
    """1.22-1.23 FilterEndpoints (pkg/proxy/topology.go): iTP=Local narrows the Service to local endpoints,
    unless eTP=Local, which returns them all, in iptables and ipvs alike."""
    for version in ("1.22", "1.23"):
        svc = ServiceView.build(port("Local", external, HERE, THERE), Release.of(version))
        assert svc is not None
        assert categorize(svc, Release.of(version)).cluster == cluster
        rules = render_iptables([port("Local", external, HERE, THERE)], ProxyConfig(), ["192.168.0.1"], version)
        dnat = {rule.split("--to-destination ")[1] for rule in rules.nat_rules if "--to-destination" in rule}
        assert dnat == {ep.address for ep in cluster}
        ipvs = render_ipvs([port("Local", external, HERE, THERE)], ProxyConfig(), ["192.168.0.1"], version)
        cluster_ip = next(vs for vs in ipvs.virtual_servers if vs.address == "172.30.0.10")
        # The ClusterIP virtual server is iTP=Local's: local endpoints only, whatever FilterEndpoints returned.
        assert [rs.text for rs in cluster_ip.real_servers] == [HERE.address]


def test_categorize_by_release():
    """Ready only up to 1.21; from 1.26 a serving, terminating endpoint stands in when none is ready."""
    terminating = Endpoint("10.0.2.3", 8080, is_local=False, ready=False, serving=True, terminating=True)
    svc = ServiceView.build(port("Cluster", "Cluster", terminating), Release.of("1.25"))
    assert svc is not None
    assert categorize(svc, Release.of("1.25")).cluster == ()
    assert categorize(svc, Release.of("1.26")).cluster == (terminating,)
    unready = Endpoint("10.0.2.4", 8080, is_local=False, ready=False)
    svc = ServiceView.build(port("Cluster", "Cluster", HERE, unready), Release.of("1.21"))
    assert svc is not None
    assert categorize(svc, Release.of("1.21")).reachable == (HERE,)
    assert categorize(svc, Release.of("1.22")).reachable == (HERE, unready)  # 1.22 chains unready ones too
    assert categorize(svc, Release.of("1.23")).reachable == (HERE,)


# kubernetes#135266: one EndpointSlice lists a pod that is terminating (not ready, not serving) and a new ready pod
# that was given the same IP, in that order.
GHOST = Endpoint("10.0.1.5", 8080, is_local=False, ready=False, serving=False, terminating=True)
REAL = Endpoint("10.0.1.5", 8080, is_local=False)


@pytest.mark.parametrize(
    ("version", "where", "kept"),
    [
        ("1.20", "elsewhere", REAL),  # not-ready copies never reach the merge
        ("1.20", "on the ghost's node", REAL),
        ("1.35", "elsewhere", GHOST),  # the first met stays
        ("1.35", "on the ghost's node", replace(GHOST, is_local=True)),  # and is local there
        ("1.35", "on the real pod's node", replace(REAL, is_local=True)),  # a later local copy replaces it
        ("1.36", "elsewhere", REAL),
        ("1.36", "on the ghost's node", REAL),
        ("1.36", "on the real pod's node", replace(REAL, is_local=True)),
    ],
)
def test_two_endpoints_with_one_ip_kept_by_release(version, where, kept):
    """EndpointSliceCache keeps one endpoint per IP:port: up to 1.35 the first, or a later one on this node; from
    1.36 (#135593) the ready one; up to 1.20 only ready ones are there to merge. Where 1.35 keeps the terminating
    copy, the Service has no usable endpoint."""
    ghost = replace(GHOST, is_local=where == "on the ghost's node")
    real = replace(REAL, is_local=where == "on the real pod's node")
    release = Release.of(version)
    svc = ServiceView.build(port("Cluster", "Cluster", ghost, real), release)
    assert svc is not None
    assert svc.endpoints == (kept,)
    assert categorize(svc, release).has_endpoints == kept.ready
