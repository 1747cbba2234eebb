"""kube-proxy's conntrack options in a scenario: refused where that release has no such field, and
tcpBeLiberal as a matrix axis."""

from __future__ import annotations

from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario

WITH_OPTIONS = BASE.replace(
    "cluster: {clusterCIDR: 10.244.0.0/16,",
    'cluster: {kubeVersion: "1.28", conntrack: {tcpBeLiberal: true}, clusterCIDR: 10.244.0.0/16,',
)


def test_an_option_the_release_lacks_is_refused_at_its_field(tmp_path):
    assert WITH_OPTIONS != BASE
    error = error_for(tmp_path, WITH_OPTIONS)
    assert (error.line, error.field) == (2, "cluster.conntrack.tcpBeLiberal"), str(error)
    assert error.message == "kube-proxy 1.28 has no conntrack.tcpBeLiberal (added in 1.29, kubernetes#120354)"


def test_tcp_be_liberal_as_a_matrix_axis(tmp_path):
    text = BASE + "matrix:\n  tcpBeLiberal: [false, true]\n"
    variants = load_scenario(write(tmp_path, text)).variants
    assert [v.cluster.tcp_be_liberal for v in variants] == [False, True]
    udp = WITH_OPTIONS.replace('"1.28"', '"1.29"').replace("tcpBeLiberal: true", "udpTimeout: 60")
    (topo,) = load_scenario(write(tmp_path, udp)).variants
    assert (topo.cluster.udp_timeout, topo.cluster.tcp_be_liberal) == (60, False)
