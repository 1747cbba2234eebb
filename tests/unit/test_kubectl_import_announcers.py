"""Who announces a LoadBalancer address, as `lab import` reads it: MetalLB's IPAddressPools with their
L2Advertisements (nodeSelectors, pools by name or selector, speaker pods, nodes labelled out of load balancers) and
BGPAdvertisements, kube-vip's environment, an address in the nodes' network with no announcer (modelled as MetalLB's
layer 2 and said), one the lab cannot announce (IPv6: refused, said); MetalLB's and kube-vip's fields are untrusted
input, refused at their file, line and field. Copies of tests/fixtures/kubectl/metallb-l2, edited in tmp_path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.describe.errors import ScenarioError
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.scenario import Imported, Options, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.describe.load import load_scenario

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "kubectl"
CLUSTER = FIXTURES / "metallb-l2"
DUMP = yaml.safe_load((CLUSTER / "dump.yaml").read_text())
METALLB = yaml.safe_load((CLUSTER / "metallb.yaml").read_text())
Edit = Callable[[list[dict[str, Any]]], None]


def _files(tmp_path: Path, dump: Edit | None = None, metallb: Edit | None = None, with_metallb: bool = True):
    """The cluster's files, dump.yaml and metallb.yaml copied with each edit made to their items."""
    files = []
    for name, data, edit in (("dump.yaml", DUMP, dump), ("metallb.yaml", METALLB, metallb)):
        if name == "metallb.yaml" and not with_metallb:
            continue
        copied = copy.deepcopy(data)
        if edit is not None:
            edit(copied["items"])
        (tmp_path / name).write_text(yaml.safe_dump(copied, sort_keys=False))
        files.append(str(tmp_path / name))
    return files + [str(CLUSTER / f) for f in ("kube-proxy.yaml", "version.yaml")]


def _imported(files: list[str], tmp_path: Path, **options: Any) -> Imported:
    """The import, its scenario checked as lab validate checks it."""
    result = import_cluster(read_inputs(files), Options(**options))
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(result.scenario))
    load_scenario(path)
    return result


def _refusal(files: list[str]) -> str:
    with pytest.raises(ScenarioError) as info:
        import_cluster(read_inputs(files), Options())
    return str(info.value)


def _item(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


def _advertisement(items: list[dict[str, Any]]) -> dict[str, Any]:
    return _item(items, "L2Advertisement", "lan-l2")


def _one_note(result: Imported, *words: str) -> str:
    found = [n for n in result.notes if all(w in n for w in words)]
    assert len(found) == 1, (words, result.notes)
    return found[0]


def _line_of(path: str, text: str) -> int:
    return next(i for i, line in enumerate(Path(path).read_text().splitlines(), 1) if text in line)


def test_pools_and_l2_advertisements_make_a_layer2_load_balancer_of_the_selected_nodes(tmp_path):
    result = _imported(_files(tmp_path), tmp_path)
    assert result.scenario["loadBalancers"] == [
        {"name": "metallb", "mode": "layer2", "services": ["default/web", "default/api"], "nodes": ["node3", "node4"]}
    ]
    assert "externalHosts" in result.scenario and "routes" not in result.scenario["externalHosts"][0]
    note = _one_note(result, "Service default/web", "MetalLB's pool lan, announced by L2Advertisement lan-l2")
    assert "elects its speaker among node3, node4" in note


def test_without_node_selectors_every_speaker_but_the_excluded_node_may_announce(tmp_path):
    def by_name(items):
        spec = _advertisement(items)["spec"]
        spec.pop("nodeSelectors")
        spec.pop("ipAddressPoolSelectors")
        spec["ipAddressPools"] = ["lan"]

    result = _imported(_files(tmp_path, metallb=by_name), tmp_path)
    assert result.scenario["loadBalancers"][0]["nodes"] == ["node2", "node3", "node4"]  # node1: labelled out


def test_match_expressions_select_nodes_as_the_api_server_matches_them(tmp_path):
    def expressions(items):
        _advertisement(items)["spec"]["nodeSelectors"] = [
            {"matchExpressions": [{"key": "metallb-announce", "operator": "NotIn", "values": ["true"]}]}
        ]

    result = _imported(_files(tmp_path, metallb=expressions), tmp_path)
    assert result.scenario["loadBalancers"][0]["nodes"] == ["node2"]  # node1 has no such label, but is labelled out


def test_a_node_without_a_running_speaker_does_not_announce(tmp_path):
    def no_speaker_on_node3(items):
        items.remove(
            next(
                i
                for i in items
                if i["kind"] == "Pod"
                and i["spec"]["nodeName"] == "node3"
                and i["metadata"]["namespace"] == "metallb-system"
            )
        )

    result = _imported(_files(tmp_path, dump=no_speaker_on_node3), tmp_path)
    assert result.scenario["loadBalancers"][0]["nodes"] == ["node4"]


def test_an_advertisement_of_another_pool_announces_nothing_and_says_so(tmp_path):
    def other_pool(items):
        spec = _advertisement(items)["spec"]
        spec["ipAddressPoolSelectors"] = [{"matchLabels": {"reach": "wan"}}]

    result = _imported(_files(tmp_path, metallb=other_pool), tmp_path)
    assert "loadBalancers" not in result.scenario
    assert "announces it nowhere" in _one_note(result, "Service default/web", "no L2Advertisement or BGPAdvertisement")


def test_a_bgp_advertisement_routes_the_address_over_the_announcing_nodes_from_the_client(tmp_path):
    def bgp(items):
        _advertisement(items)["kind"] = "BGPAdvertisement"

    result = _imported(_files(tmp_path, metallb=bgp), tmp_path)
    assert "loadBalancers" not in result.scenario
    assert result.scenario["externalHosts"][0]["routes"] == [
        {"to": "192.168.56.241/32", "via": ["node3", "node4"]},  # web, Cluster: every selected node
        {"to": "192.168.56.240/32", "via": ["node4"]},  # api, Local: only the node with a ready local endpoint
    ]
    assert "standing in for the BGP peer" in _one_note(result, "Service default/api", "BGPAdvertisement lan-l2")


def test_without_announcer_objects_an_address_in_the_nodes_network_is_modelled_as_layer2_and_said(tmp_path):
    result = _imported(_files(tmp_path, with_metallb=False), tmp_path)
    assert result.scenario["loadBalancers"] == [
        {
            "name": "layer2",
            "mode": "layer2",
            "services": ["default/web", "default/api"],
            "nodes": ["node2", "node3", "node4"],
        }
    ]
    note = _one_note(result, "Service default/web", "taken to be announced in layer 2 as MetalLB does")
    assert "no MetalLB pool holds it and no kube-vip serves Services" in note


def _kube_vip(env: dict[str, Any]) -> Edit:
    """A kube-vip pod on node2 and node3 (static pods), with `env`."""

    def add(items):
        for node in ("node2", "node3"):
            speaker = next(
                i
                for i in items
                if i["kind"] == "Pod" and i["spec"]["nodeName"] == node and i["spec"].get("hostNetwork")
            )
            pod = copy.deepcopy(speaker)
            pod["metadata"] = {"name": f"kube-vip-{node}", "namespace": "kube-system"}
            pod["spec"]["containers"] = [
                {
                    "name": "kube-vip",
                    "image": "ghcr.io/kube-vip/kube-vip:v0.8.0",
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                }
            ]
            items.append(pod)

    return add


def test_kube_vip_in_arp_mode_announces_from_the_nodes_it_runs_on(tmp_path):
    env = {"vip_arp": "true", "svc_enable": "true", "vip_interface": "eth0"}
    result = _imported(_files(tmp_path, dump=_kube_vip(env), with_metallb=False), tmp_path)
    assert result.scenario["loadBalancers"] == [
        {"name": "kube-vip", "mode": "layer2", "services": ["default/web", "default/api"], "nodes": ["node2", "node3"]}
    ]
    assert "one leader for every Service" in _one_note(result, "Service default/web", "kube-vip: ARP (vip_arp)")


def test_kube_vip_in_bgp_mode_routes_over_its_nodes(tmp_path):
    env = {"bgp_enable": "True", "svc_enable": "1", "svc_election": "t"}
    result = _imported(_files(tmp_path, dump=_kube_vip(env), with_metallb=False), tmp_path)
    assert result.scenario["externalHosts"][0]["routes"][0] == {"to": "192.168.56.241/32", "via": ["node2", "node3"]}
    assert "a leader elected per Service" in _one_note(result, "Service default/web", "kube-vip: BGP (bgp_enable)")


def test_kube_vip_for_the_control_plane_only_is_said_and_announces_no_service(tmp_path):
    result = _imported(
        _files(tmp_path, dump=_kube_vip({"vip_arp": "true", "cp_enable": "true"}), with_metallb=False), tmp_path
    )
    assert result.scenario["loadBalancers"][0]["name"] == "layer2"
    assert len([n for n in result.notes if "kube-vip without svc_enable" in n]) == 2


def test_a_kube_vip_switch_that_is_not_a_boolean_is_refused_at_its_line(tmp_path):
    files = _files(tmp_path, dump=_kube_vip({"vip_arp": "yes", "svc_enable": "true"}), with_metallb=False)
    said = _refusal(files)
    line = _line_of(files[0], "value: 'yes'")
    assert said.startswith(f"{files[0]}:{line}:")
    assert "Pod kube-system/kube-vip-node2" in said and "expected true or false" in said and "'yes'" in said


def test_an_ipv6_address_in_the_nodes_network_is_left_out_with_words(tmp_path):
    cluster = FIXTURES / "dual-stack"
    data = yaml.safe_load((cluster / "dump.yaml").read_text())
    web = next(i for i in data["items"] if i["kind"] == "Service" and i["metadata"]["name"] == "web")
    web["spec"]["type"] = "LoadBalancer"
    web["status"] = {
        "loadBalancer": {
            "ingress": [{"ip": "192.168.56.240", "ipMode": "VIP"}, {"ip": "fd00:56::240", "ipMode": "VIP"}]
        }
    }
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump(data))
    files = [str(tmp_path / "dump.yaml")] + [str(cluster / f) for f in ("kube-proxy.yaml", "version.yaml")]
    result = _imported(files, tmp_path)
    note = _one_note(result, "Service default/web", "fd00:56::240: left out, with its probes")
    assert "NDP" in note
    written = next(m for m in result.scenario["workload"] if m["kind"] == "Service" and m["metadata"]["name"] == "web")
    assert written["status"]["loadBalancer"]["ingress"] == [{"ip": "192.168.56.240", "ipMode": "VIP"}]
    assert result.scenario["loadBalancers"][0]["services"] == ["default/web"]


@pytest.mark.parametrize(
    ("edit", "line_text", "said"),
    [
        (
            lambda i: i[0]["spec"].update(addresses=["192.168.56.250-192.168.56.240"]),
            "192.168.56.250-",
            "IPAddressPool metallb-system/lan: spec.addresses[0]: expected a CIDR",
        ),
        (lambda i: i[0]["spec"].update(addresses=["192.168.56.0/33"]), "/33", "spec.addresses[0]: expected a CIDR"),
        (lambda i: i[0]["spec"].update(addresses=["192.168.56.240"]), "- 192.168.56.240", "expected a CIDR"),
        (lambda i: i[0]["spec"].update(addresses=[]), "addresses", "spec.addresses: missing"),
        (lambda i: i[0]["spec"].update(autoAssign="yes"), "autoAssign", "spec.autoAssign: expected true or false"),
        (lambda i: i[0].update(apiVersion="metallb.io/v1alpha1"), "v1alpha1", "expected metallb.io/v1beta1"),
        (lambda i: i[1]["spec"].update(ipAddressPools="lan"), "ipAddressPools", "spec.ipAddressPools: expected a list"),
        (
            lambda i: i[1]["spec"]["nodeSelectors"][0].update(matchExpressions=[{"key": "a", "operator": "Has"}]),
            "operator",
            "expected In, NotIn, Exists or DoesNotExist, got 'Has'",
        ),
        (
            lambda i: i[1]["spec"]["nodeSelectors"][0].update(matchExpressions=[{"key": "a", "operator": "In"}]),
            "key: a",
            "In needs at least one value",
        ),
        (
            lambda i: i[1]["spec"]["nodeSelectors"][0].update(matchLabels={"a": 1}),
            "a: 1",
            "matchLabels.a: expected text",
        ),
    ],
)
def test_a_malformed_metallb_object_is_refused_at_its_file_line_and_field(tmp_path, edit, line_text, said):
    files = _files(tmp_path, metallb=edit)
    refused = _refusal(files)
    assert refused.startswith(f"{files[1]}:{_line_of(files[1], line_text)}:"), refused
    assert said in refused


def test_metallb_annotations_that_differ_from_the_assigned_address_are_said(tmp_path):
    def annotate(items):
        _item(items, "Service", "web")["metadata"]["annotations"] = {
            "metallb.io/loadBalancerIPs": "192.168.56.245",
            "metallb.universe.tf/address-pool": "lan",
        }

    result = _imported(_files(tmp_path, dump=annotate), tmp_path)
    assert "the address MetalLB assigned (the status) is announced" in _one_note(
        result, "Service default/web", "metallb.io/loadBalancerIPs"
    )
    assert not [n for n in result.notes if "address-pool" in n]  # lan holds the address: nothing to say


def test_node_selectors_that_take_no_node_announce_nothing_and_say_so(tmp_path):
    def nowhere(items):
        _advertisement(items)["spec"]["nodeSelectors"] = [{"matchLabels": {"metallb-announce": "never"}}]

    result = _imported(_files(tmp_path, metallb=nowhere), tmp_path)
    assert "loadBalancers" not in result.scenario
    assert "no node may announce it" in _one_note(result, "Service default/web", "L2Advertisement lan-l2")


def test_with_service_the_nodes_allowed_to_announce_left_out_are_said(tmp_path):
    result = _imported(_files(tmp_path), tmp_path, services=["default/web"])
    assert [n["name"] for n in result.scenario["nodes"]] == ["node1", "node2"]  # web's node and one more
    assert "loadBalancers" not in result.scenario
    assert "(node3, node4) are not imported (--service)" in _one_note(result, "Service default/web", "lan-l2")


def test_an_address_two_services_share_is_announced_for_the_first_and_said_for_the_second(tmp_path):
    def share(items):
        api = _item(items, "Service", "api")
        api["metadata"]["annotations"]["metallb.io/allow-shared-ip"] = "web"
        api["status"]["loadBalancer"]["ingress"][0]["ip"] = "192.168.56.241"

    result = _imported(_files(tmp_path, dump=share), tmp_path)
    assert result.scenario["loadBalancers"][0]["services"] == ["default/web"]
    note = _one_note(result, "Service default/api", "192.168.56.241: left out, with its probes")
    assert "default/web has it too" in note
    assert not [p for p in result.scenario["probes"] if p["name"].startswith("default-api-http-load-balancer")]


def _lease(namespace: str, name: str, holder: str) -> Edit:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 5},
    }
    return lambda items: items.append(lease)


def _both(*edits: Edit) -> Edit:
    def apply(items):
        for edit in edits:
            edit(items)

    return apply


def test_kube_vip_s_one_leader_from_its_lease_announces_where_the_lab_can_make_it(tmp_path):
    arp = _kube_vip({"vip_arp": "true", "svc_enable": "true"})
    files = _files(tmp_path, dump=_both(arp, _lease("kube-system", "plndr-svcs-lock", "node3")), with_metallb=False)
    result = _imported(files, tmp_path)
    assert result.scenario["loadBalancers"] == [
        {
            "name": "kube-vip",
            "mode": "layer2",
            "services": ["default/web"],
            "nodes": ["node2", "node3"],
            "announcer": "node3",
        },
        {"name": "kube-vip-2", "mode": "layer2", "services": ["default/api"], "nodes": ["node2", "node3"]},
    ]
    assert "held by node3: it announces" in _one_note(result, "Service default/web", "kube-vip")
    # api is Local and runs on node4, where kube-vip does not: node3 answers on the cluster and drops it.
    assert "which the lab cannot make announce" in _one_note(result, "Service default/api", "kube-vip")


def test_kube_vip_s_per_service_lease_pins_each_service_s_leader(tmp_path):
    arp = _kube_vip({"vip_arp": "true", "svc_enable": "true", "svc_election": "true"})
    files = _files(tmp_path, dump=_both(arp, _lease("default", "kubevip-web", "node2")), with_metallb=False)
    result = _imported(files, tmp_path)
    assert result.scenario["loadBalancers"][0]["announcer"] == "node2"
    assert "default/kubevip-api is not in the input" in _one_note(result, "Service default/api", "kube-vip")
