"""Every field of the renderer's kube-proxy configuration (lab/render/kubeproxy/service.py, ProxyConfig: what
render takes besides the Services) has a way in: a scenario field sets it, and `lab import` sets that scenario
field from what sets it in a cluster (a KubeProxyConfiguration key, or the objects kube-proxy watches). A field
that kube-proxy computes itself says from what. A field added to ProxyConfig without either fails here with its
name: the renderer would hold a rule no scenario and no imported cluster could ever switch on (issue 31: the
nftables drop of unallocated ClusterIPs, written by the renderer and fed by nothing)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from lab.describe.errors import ScenarioError
from lab.describe.kubectl.objects import KINDS, read_inputs
from lab.describe.kubectl.proxyconfig import kube_proxy_config
from lab.describe.load import load_scenario
from lab.render.kubeproxy.adapter import proxy_config
from lab.render.kubeproxy.service import ProxyConfig


@dataclass(frozen=True)
class Fed:
    """A field a user sets: `scenario` (YAML under `cluster:`) sets it to other than the base scenario's value;
    `config` (KubeProxyConfiguration YAML) is what sets it in a cluster, read by the import; `objects` instead names
    the kind of object kube-proxy learns it from, which the import reads."""

    scenario: str
    config: str = ""
    objects: str = ""


@dataclass(frozen=True)
class Derived:
    """A field no user sets: kube-proxy computes it itself, from what `why` says."""

    why: str


NEWEST = "1.37"  # the release that knows every option below (each is checked against its own release's schema)
NFT_GATE = "KubeProxyNFTablesLocalhostNodePorts"
CONFIG_HEAD = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

FIELDS: dict[str, Fed | Derived] = {
    "cluster_cidr": Fed("kubeProxyClusterCIDR: false", config="mode: iptables"),  # no clusterCIDR: no detector
    "masquerade_all": Fed("masqueradeAll: true", config="iptables: {masqueradeAll: true}"),
    "node_port_addresses": Fed("nodePortAddresses: [192.168.56.0/24]", config="nodePortAddresses: [192.168.56.0/24]"),
    "localhost_nodeports": Fed("iptables: {localhostNodePorts: false}", config="iptables: {localhostNodePorts: false}"),
    "nft_localhost_nodeports": Fed(
        f'{{proxyMode: nftables, kubeVersion: "{NEWEST}", featureGates: {{{NFT_GATE}: true}}}}',
        config=f"{{mode: nftables, featureGates: {{{NFT_GATE}: true}}}}",
    ),
    "masquerade_bit": Fed("masqueradeBit: 15", config="iptables: {masqueradeBit: 15}"),
    "conntrack_tcp_be_liberal": Fed("conntrack: {tcpBeLiberal: true}", config="conntrack: {tcpBeLiberal: true}"),
    "ipvs_strict_arp": Fed("ipvs: {strictARP: true}", config="{mode: ipvs, ipvs: {strictARP: true}}"),
    "ipvs_scheduler": Fed("ipvs: {scheduler: wrr}", config="{mode: ipvs, ipvs: {scheduler: wrr}}"),
    # The API server's --service-cluster-ip-range, through the ServiceCIDR objects kube-proxy watches from 1.33.
    "service_cidrs": Fed('{kubeVersion: "1.33", serviceCIDR: 10.100.0.0/16}', objects="ServiceCIDR"),
    "family": Derived("one proxier per family of the cluster's networks (NewDualStackProxier), each its own family"),
    "random_fully": Derived("iptables' own --random-fully support (HasRandomFully), which every lab node has"),
    "nfacct_counters": Derived("whether the kernel lets kube-proxy create nfacct objects (counters only)"),
    "masquerade_mark": Derived("kube-proxy's unit-test fake proxier's literal mark; a node formats masqueradeBit"),
}

BASE = """name: coverage
cluster: {cluster}
nodes:
  - {{name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}}
  - {{name: node2, ip: 192.168.56.12, podCIDR: 10.244.2.0/24}}
probes:
  - {{name: ping, from: node1, to: {{address: 192.168.56.12, port: 22}}, expect: {{outcome: refused}}}}
"""


def configuration(tmp_path: Path, cluster: dict | str) -> ProxyConfig:
    """kube-proxy's configuration as render gets it for a scenario with this `cluster` (a mapping, or YAML)."""
    text = yaml.safe_dump(_mapping(cluster) if isinstance(cluster, str) else cluster, default_flow_style=True).strip()
    path = tmp_path / "s.yaml"
    path.write_text(BASE.format(cluster=text))
    (topo,) = load_scenario(path).variants
    return proxy_config(topo)


def test_every_field_of_the_renderers_configuration_has_a_way_in():
    unmapped = [f.name for f in dataclasses.fields(ProxyConfig) if f.name not in FIELDS]
    assert not unmapped, (
        f"ProxyConfig field(s) {', '.join(unmapped)}: no scenario field or imported kube-proxy option sets them; feed "
        "each (schema, resolve/cluster.py, adapter.proxy_config, the import) or say what kube-proxy derives it from"
    )
    assert set(FIELDS) <= {f.name for f in dataclasses.fields(ProxyConfig)}, "FIELDS names a field ProxyConfig lacks"


FED = [name for name, how in FIELDS.items() if isinstance(how, Fed)]


@pytest.mark.parametrize("name", FED)
def test_a_scenario_field_sets_it(tmp_path, name):
    how = FIELDS[name]
    assert isinstance(how, Fed)
    base = getattr(configuration(tmp_path, "{}"), name)
    assert getattr(configuration(tmp_path, how.scenario), name) != base, f"`cluster: {how.scenario}` leaves {name}"


@pytest.mark.parametrize("name", FED)
def test_the_import_sets_that_scenario_field_from_what_sets_it_in_a_cluster(tmp_path, name):
    how = FIELDS[name]
    assert isinstance(how, Fed)
    if how.objects:
        assert how.objects in KINDS, f"{name} comes from {how.objects} objects, which lab import does not read"
        return
    path = tmp_path / "kube-proxy.yaml"
    path.write_text(CONFIG_HEAD + _block(how.config))
    (obj,) = read_inputs([str(path)]).objects["KubeProxyConfiguration"]
    imported = kube_proxy_config(obj, NEWEST)
    base = getattr(configuration(tmp_path, {"kubeVersion": NEWEST}), name)
    assert getattr(configuration(tmp_path, {**imported.cluster, "kubeVersion": NEWEST}), name) != base, (
        f"{how.config} in kube-proxy's configuration leaves {name}: {imported.notes}"
    )


def _mapping(flow: str) -> dict:
    """A flow mapping written with or without its braces ("{a: 1, b: 2}", "a: 1")."""
    return yaml.safe_load(flow if flow.startswith("{") else f"{{{flow}}}")


def _block(flow: str) -> str:
    """A flow mapping as a document's top-level keys."""
    return yaml.safe_dump(_mapping(flow))


@pytest.mark.parametrize(
    ("section", "mode"), [("iptables", "iptables"), ("iptables", "ipvs"), ("nftables", "nftables")]
)
def test_the_masquerade_bit_of_the_modes_own_section_is_taken_and_the_other_said(tmp_path, section, mode):
    """server.go hands iptables and ipvs mode iptables.masqueradeBit, nftables mode nftables.masqueradeBit."""
    other = "nftables" if section == "iptables" else "iptables"
    path = tmp_path / "kube-proxy.yaml"
    text = f"{{mode: {mode}, {section}: {{masqueradeBit: 13}}, {other}: {{masqueradeBit: 12}}}}"
    path.write_text(CONFIG_HEAD + _block(text))
    (obj,) = read_inputs([str(path)]).objects["KubeProxyConfiguration"]
    imported = kube_proxy_config(obj, NEWEST)
    assert imported.cluster["masqueradeBit"] == 13
    assert [n for n in imported.notes if f"{other}.masqueradeBit: 12: no effect in {mode} mode" in n]
    mark = configuration(tmp_path, {**imported.cluster, "kubeVersion": NEWEST}).masquerade_bit
    assert mark == 13


@pytest.mark.parametrize("bit", [-1, 32])
def test_a_masquerade_bit_kube_proxy_refuses_is_refused(tmp_path, bit):
    path = tmp_path / "kube-proxy.yaml"
    path.write_text(f"{CONFIG_HEAD}iptables: {{masqueradeBit: {bit}}}\n")
    (obj,) = read_inputs([str(path)]).objects["KubeProxyConfiguration"]
    with pytest.raises(ScenarioError, match=r"iptables\.masqueradeBit: .*must be within the range \[0, 31\]"):
        kube_proxy_config(obj, NEWEST)
    with pytest.raises(ScenarioError, match="masqueradeBit"):
        configuration(tmp_path, {"masqueradeBit": bit})
