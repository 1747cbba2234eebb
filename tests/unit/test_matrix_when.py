"""`when` may name any value an axis can take: a value this run's matrix leaves out applies to no variant, so
`lab run --matrix proxyMode=ipvs` keeps a file's nftables expectations; a value no variant could have is refused."""

from __future__ import annotations

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario

PER_MODE = BASE.replace(
    "    expect: {outcome: delivered, source: node2}\n",
    "    expect:\n"
    "      - {when: {proxyMode: nftables}, outcome: dropped}\n"
    "      - {outcome: delivered, source: node2}\n",
)


def test_a_flag_matrix_keeps_expectations_for_modes_it_leaves_out(tmp_path):
    (topo,) = load_scenario(write(tmp_path, PER_MODE), {"proxyMode": ["ipvs"]}).variants
    assert dict(topo.variant) == {"proxyMode": "ipvs"} and topo.probes[0].expected.outcome == "delivered"


def test_a_file_matrix_may_leave_out_a_mode_its_expectations_name(tmp_path):
    text = PER_MODE + "matrix:\n  proxyMode: [iptables, ipvs]\n"
    variants = load_scenario(write(tmp_path, text)).variants
    assert [v.probes[0].expected.outcome for v in variants] == ["delivered", "delivered"]
    (nft,) = load_scenario(write(tmp_path, text), {"proxyMode": ["nftables"]}).variants
    assert nft.probes[0].expected.outcome == "dropped"


def test_a_value_no_variant_could_have_is_refused(tmp_path):
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, PER_MODE.replace("nftables}", "nftabels}")), {"proxyMode": ["ipvs"]})
    assert info.value.field == "probes[0].expect[0].when.proxyMode"
    assert "'nftabels' is no value of proxyMode (the matrix lists ['ipvs'])" in info.value.message


def test_an_axis_outside_the_matrix_is_still_refused(tmp_path):
    assert "'proxyMode' is not a matrix axis of this scenario" in str(error_for(tmp_path, PER_MODE))


def test_a_boolean_axis_value_quoted_as_text_is_refused(tmp_path):
    text = BASE + "matrix:\n  kubeProxyClusterCIDR: [true]\n"
    text = text.replace(
        "    expect: {outcome: delivered, source: node2}\n",
        "    expect:\n"
        "      - {when: {kubeProxyClusterCIDR: 'false'}, outcome: dropped}\n"
        "      - {outcome: delivered, source: node2}\n",
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    assert info.value.field == "probes[0].expect[0].when.kubeProxyClusterCIDR"
    assert "'false' is no value of kubeProxyClusterCIDR" in info.value.message
