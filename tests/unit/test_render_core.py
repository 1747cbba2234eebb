"""The kube-proxy core of render: one version table whose every switch cites its change, asked by everything
that depends on the release, and one endpoint selection for every mode."""

from __future__ import annotations

import inspect
import re
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
    svc = ServiceView.build(port("Local", external, HERE, THERE))
    assert svc is not None
    for version in ("1.22", "1.23"):
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
    svc = ServiceView.build(port("Cluster", "Cluster", terminating))
    assert svc is not None
    assert categorize(svc, Release.of("1.25")).cluster == ()
    assert categorize(svc, Release.of("1.26")).cluster == (terminating,)
    unready = Endpoint("10.0.2.4", 8080, is_local=False, ready=False)
    svc = ServiceView.build(port("Cluster", "Cluster", HERE, unready))
    assert svc is not None
    assert categorize(svc, Release.of("1.21")).reachable == (HERE,)
    assert categorize(svc, Release.of("1.22")).reachable == (HERE, unready)  # 1.22 chains unready ones too
    assert categorize(svc, Release.of("1.23")).reachable == (HERE,)
