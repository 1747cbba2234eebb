from pathlib import Path

from lab.describe.load import load_scenario
from lab.describe.topology import ENTRY, entry_suffix, variant_label
from lab.live.record import LiveLab

HAIRPIN = Path(__file__).resolve().parents[2] / "topologies" / "hairpin.yaml"


def test_the_variant_label_is_the_same_for_a_run_and_for_a_live_lab_of_it():
    topo = load_scenario(HAIRPIN).variants[0]
    assert topo.variant_label == variant_label(topo.variant) == "proxyMode=iptables, hairpinMode=hairpin-veth"
    lab = LiveLab("lab-000000", str(HAIRPIN), topo.scenario, {k: str(v) for k, v in topo.variant}, {}, 0.0, "")
    assert lab.variant_label == topo.variant_label
    assert variant_label([("tcpBeLiberal", True)]) == "tcpBeLiberal=true"  # as the file spells YAML's booleans


def test_a_name_relative_to_the_entry_node_is_told_apart_from_others():
    assert [entry_suffix(n) for n in (ENTRY, f"{ENTRY}/eth0", "entryway", "node1", None)] == ["", "/eth0", *[None] * 3]


def test_a_name_stands_for_one_address():
    topo = load_scenario(HAIRPIN).variants[0]
    node = topo.nodes[0]
    assert topo.address_of(node.name) == topo.address_of(f"{node.name}/eth0") == node.ip
    assert topo.address_of(f"{node.name}/cni0") == node.bridge_ip
    assert topo.address_of("no-such-name") is None
