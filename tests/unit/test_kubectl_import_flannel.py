"""`lab import` of a flannel cluster (its DaemonSet's pods in kube-flannel, its ConfigMap kube-flannel-cfg): built as
cni: flannel, net-conf.json read and said; what the lab does not build of it refused in words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_kubectl_import import FIXTURES, imported, loaded, notes_about

from lab.describe.errors import ScenarioError

FLANNEL = FIXTURES / "flannel"
DUMP = [
    str(FLANNEL / "dump.yaml"),
    *(str(FIXTURES / "nodeport-source-ip" / f) for f in ("kube-proxy.yaml", "version.yaml")),
]
CONFIG = str(FLANNEL / "kube-flannel-cfg.yaml")


def with_net_conf(tmp_path: Path, **changes: object) -> str:
    """The fixture's kube-flannel-cfg with its net-conf.json changed."""
    conf = {"Network": "10.244.0.0/16", "EnableNFTables": False, "Backend": {"Type": "vxlan"}} | changes
    text = Path(CONFIG).read_text()
    start = text.index("  net-conf.json: |\n")
    end = text.index("kind: ConfigMap")
    body = "".join(f"    {line}\n" for line in json.dumps(conf, indent=2).splitlines())
    path = tmp_path / "kube-flannel-cfg.yaml"
    path.write_text(text[:start] + "  net-conf.json: |\n" + body + text[end:])
    return str(path)


def test_a_flannel_cluster_is_built_as_cni_flannel(tmp_path):
    result = imported([*DUMP, CONFIG])
    assert result.scenario["cluster"]["cni"] == "flannel"
    topo = loaded(tmp_path, result)
    assert topo.cluster.cni == "flannel"
    assert topo.node("node1").tunnel_ip == "10.244.1.0"
    assert notes_about(result, "the cluster runs flannel: built as cni: flannel")
    (said,) = notes_about(result, "ConfigMap kube-flannel/kube-flannel-cfg")
    assert "vxlan backend for Network 10.244.0.0/16: built as cni: flannel" in said
    assert not notes_about(result, "not read: no KubeProxyConfiguration")


def test_without_its_configmap_flannels_defaults_are_said():
    result = imported(DUMP)
    assert result.scenario["cluster"]["cni"] == "flannel"
    assert notes_about(result, "no flannel ConfigMap kube-flannel-cfg", "Network 10.244.0.0/16")


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"Backend": {"Type": "host-gw"}}, 'Backend.Type "host-gw": the lab builds flannel\'s vxlan backend only'),
        ({"Backend": {}}, 'Backend.Type "udp"'),
        ({"Backend": {"Type": "vxlan", "VNI": 4096}}, "Backend.VNI 4096"),
        ({"Backend": {"Type": "vxlan", "DirectRouting": True}}, "Backend.DirectRouting true"),
        ({"EnableNFTables": True}, "EnableNFTables true: flannel's nftables rules are not modelled"),
        ({"EnableNFTables": "no"}, 'EnableNFTables "no": expected true or false'),
        ({"Backend": [1]}, "Backend [1]: expected a JSON object with Type"),
        ({"Network": "10.32.0.0/12"}, 'Network "10.32.0.0/12": the lab builds flannel for the cluster\'s pod network'),
    ],
)
def test_what_the_lab_does_not_build_of_flannel_is_refused(tmp_path, changes, said):
    with pytest.raises(ScenarioError) as info:
        imported([*DUMP, with_net_conf(tmp_path, **changes)])
    assert said in info.value.message, str(info.value)
    assert info.value.field.endswith(": data.net-conf.json"), str(info.value)


def test_net_conf_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(Path(CONFIG).read_text().replace('"Network": "10.244.0.0/16",', '"Network": 10.244.0.0/16,'))
    with pytest.raises(ScenarioError) as info:
        imported([*DUMP, str(path)])
    assert "not JSON" in info.value.message and info.value.field.endswith(": data.net-conf.json"), str(info.value)


def test_net_conf_nested_too_deep_is_refused_in_words(tmp_path):
    path = tmp_path / "cfg.yaml"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(Path(CONFIG).read_text().replace('"Network": "10.244.0.0/16",', f'"Network": {deep},'))
    with pytest.raises(ScenarioError) as info:
        imported([*DUMP, str(path)])
    assert "nested deeper" in info.value.message, str(info.value)


def test_net_conf_fields_the_lab_does_not_check_are_said(tmp_path):
    changes = {"SubnetLen": 26, "Backend": {"Type": "vxlan", "MTU": 1400}}
    result = imported([*DUMP, with_net_conf(tmp_path, **changes)])
    assert notes_about(result, "SubnetLen, Backend.MTU: not modelled")
    assert not notes_about(result, "Network, ")
