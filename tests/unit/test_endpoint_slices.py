"""Hand-written EndpointSlices for Services without a selector: their endpoints (a pod or an external host, with
the slice's conditions and nodeName), a Service with none, and each mistake at its line."""

from __future__ import annotations

import pytest
from support.host import REPO
from support.scenario import error_for, write

from lab.describe.load import load_scenario

SELECTORLESS = (REPO / "tests" / "integration" / "topologies" / "selectorless.yaml").read_text()


def test_slice_endpoints_are_the_services(tmp_path):
    topo = load_scenario(write(tmp_path, SELECTORLESS), {"proxyMode": ["iptables"]}).variants[0]
    backends, nothing = topo.services
    (port,) = backends.ports
    assert [(ep.pod, ep.node, ep.ip, ep.port, ep.ready, ep.serving) for ep in port.endpoints] == [
        ("db", "", "192.168.56.50", 5432, True, True),
        ("cache", "node2", "10.244.2.2", 5432, False, True),  # serving unset: true, as kube-proxy reads it
    ]
    assert nothing.ports[0].endpoints == ()


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        (
            "addresses: [192.168.56.50]",
            "addresses: [192.168.56.51]",
            "workload[3].endpoints[0].addresses[0]",
            "no pod's",
        ),
        (
            "labels: {kubernetes.io/service-name: backends}",
            "labels: {app: x}",
            "workload[3].metadata.labels",
            "names its",
        ),
        (
            "service-name: backends}",
            "service-name: other}",
            "workload[3].metadata.labels.kubernetes.io/service-name",
            "no Service default/other",
        ),
        ("    addressType: IPv4\n", "    addressType: IPv6\n", "workload[3].addressType", "'IPv4'"),
        (
            "conditions: {ready: false}",
            "conditions: {ready: false, reddy: true}",
            "workload[3].endpoints[1].conditions.reddy",
            "did you mean ready?",
        ),
        (
            "    metadata: {name: backends}\n    spec:\n",
            "    metadata: {name: backends}\n    spec:\n      selector: {app: db}\n",
            "workload[3].metadata.labels.kubernetes.io/service-name",
            "has a selector, so the EndpointSlice controller writes its slices",
        ),
    ],
)
def test_slice_mistakes_are_named(tmp_path, old, new, field, message):
    assert old in SELECTORLESS
    error = error_for(tmp_path, SELECTORLESS.replace(old, new, 1))
    assert error.field == field and message in error.message, str(error)
