"""The live lab's pure parts: `lab probe --to` read against the lab's topology, and what `lab up` prints."""

from __future__ import annotations

import pytest
from support.scenario import BASE, write

from lab.api.cluster import pod_aliases
from lab.describe.load import load_scenario
from lab.live.adhoc import adhoc_probe, target
from lab.live.commands import listed
from lab.live.record import LiveLab, LiveLabError
from lab.live.summary import summary
from lab.realize.runs import RunState
from lab.selection import first_runnable


@pytest.fixture
def topo(tmp_path):
    (variant,) = load_scenario(write(tmp_path, BASE)).variants
    return variant


@pytest.mark.parametrize(
    ("text", "via", "node", "to"),
    [
        ("web:http", None, None, {"service": "web", "namespace": "default", "port": "http", "via": "clusterIP"}),
        (
            "web:80",
            "nodePort",
            "node2",
            {"service": "web", "namespace": "default", "port": 80, "via": "nodePort", "node": "node2"},
        ),
        ("node1:10256", None, None, {"node": "node1", "port": 10256}),
        ("web-0:8080", None, None, {"address": "10.244.1.2", "port": 8080}),
        ("client:22", None, None, {"address": "192.168.56.100", "port": 22}),
        ("10.244.1.3:8080", None, None, {"address": "10.244.1.3", "port": 8080}),
        ("010.244.001.003:8080", None, None, {"address": "10.244.1.3", "port": 8080}),  # as Kubernetes reads it
        ("[FD00::A]:8080", None, None, {"address": "fd00::a", "port": 8080}),
    ],
)
def test_to_names_a_service_an_actor_or_an_address(topo, text, via, node, to):
    assert target(topo, text, via, node) == to


@pytest.mark.parametrize(
    ("text", "via", "said"),
    [
        ("web", None, "expected NAME:PORT, NAMESPACE/NAME:PORT or NAME.NAMESPACE:PORT"),
        ("nope:80", None, "nope is no Service, node, pod or host of the lab"),
        ("node1:80", "nodePort", "--via and --node pick a Service's frontend"),
        ("node1:http", None, "a named port belongs to a Service"),
        ("[fd00::1%x]:80", None, "is no Service, node, pod or host"),  # a zone is no address (lab/describe/ip.py)
        ("fd00::1:80", None, "write an IPv6 address in brackets"),
    ],
)
def test_to_is_refused_with_what_was_expected(topo, text, via, said):
    with pytest.raises(LiveLabError, match=said):
        target(topo, text, via, None)


# BASE, with Services and pods of other namespaces: checkout in shop only, web in default and shop, cart in shop
# and payments (neither default), a pod web-0 in default and in shop, and a pod of default named as kube DNS would
# spell shop's Service checkout.
_SERVICE = (
    "  - {{kind: Service, metadata: {{name: {}, namespace: {}}}, spec: {{selector: {{app: web}}, ports: [{}]}}}}\n"
)
NAMESPACED = BASE.replace(
    "probes:\n",
    _SERVICE.format("checkout", "shop", "{name: http, port: 80, targetPort: http}")
    + _SERVICE.format("web", "shop", "{port: 81, targetPort: http}")
    + _SERVICE.format("cart", "shop", "{port: 82, targetPort: http}")
    + _SERVICE.format("cart", "payments", "{port: 83, targetPort: http}")
    + "  - {kind: Pod, metadata: {name: web-0, namespace: shop}, spec: {nodeName: node2, containers: [{name: c}]}}\n"
    + "  - {kind: Pod, metadata: {name: checkout.shop}, spec: {nodeName: node2, containers: [{name: c}]}}\n"
    + "probes:\n",
)


@pytest.fixture
def namespaced(tmp_path):
    (variant,) = load_scenario(write(tmp_path, NAMESPACED)).variants
    return variant


@pytest.mark.parametrize(
    ("text", "to"),
    [
        ("shop/checkout:80", {"service": "checkout", "namespace": "shop", "port": 80, "via": "clusterIP"}),
        ("shop/checkout:http", {"service": "checkout", "namespace": "shop", "port": "http", "via": "clusterIP"}),
        ("checkout:80", {"service": "checkout", "namespace": "shop", "port": 80, "via": "clusterIP"}),
        ("web:81", {"service": "web", "namespace": "default", "port": 81, "via": "clusterIP"}),
        ("web.shop:81", {"service": "web", "namespace": "shop", "port": 81, "via": "clusterIP"}),
        ("shop/web:81", {"service": "web", "namespace": "shop", "port": 81, "via": "clusterIP"}),
        ("cart.payments:83", {"service": "cart", "namespace": "payments", "port": 83, "via": "clusterIP"}),
        ("shop/web-0:8080", {"address": "10.244.2.2", "port": 8080}),
        ("default/web-0:8080", {"address": "10.244.1.2", "port": 8080}),
        ("default/checkout.shop:22", {"address": "10.244.2.3", "port": 22}),
    ],
)
def test_to_names_a_service_of_any_namespace_and_a_pod_by_namespace(namespaced, text, to):
    assert target(namespaced, text, None, None) == to


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("cart:82", "Services of several namespaces are named cart (shop/cart, payments/cart): write NAMESPACE/cart"),
        ("checkout.shop:80", "names both Service shop/checkout and pod checkout.shop: write shop/checkout"),
        ("Shop/checkout:80", "NAMESPACE in NAMESPACE/NAME is at most 63 characters of lower-case letters"),
        ("shop/check_out:80", "NAME in NAMESPACE/NAME (a Service's or a pod's) is at most 253 characters"),
        ("a/b/c:80", "'/' is not allowed"),
        ("shop/checkout:0", "a port is a number from 1 to 65535 (or a Service port's name)"),
        ("shop/checkout:65536", "a port is a number from 1 to 65535"),
        ("shop/checkout:\u00b2", "a Service port's name (or a number from 1 to 65535) is at most 63 characters"),
        ("shop/checkout:HTTP", "'H' is not allowed"),
        ("web-0:8080", "web-0 names more than one pod (default/web-0, shop/web-0): write NAMESPACE/web-0"),
        ("shop/nope:80", "shop/nope is no Service, node, pod or host of the lab (default/web, shop/checkout, "),
    ],
)
def test_a_namespaced_to_is_refused_with_the_rule_it_breaks(namespaced, text, said):
    with pytest.raises(LiveLabError) as info:
        target(namespaced, text, None, None)
    assert said in str(info.value), str(info.value)
    assert str(info.value).startswith(f"--to {text}: ")


@pytest.fixture
def live(namespaced):
    """A live lab's record of NAMESPACED, as its keeper writes it and another process reads it."""
    actors = {name: f"lab-0abc12-{n}" for n, name in enumerate([p.name for p in namespaced.built_pods] + ["node1"])}
    written = LiveLab("lab-0abc12", "/s.yaml", "t", {}, actors, 0.0, "", pod_aliases(namespaced.built_pods))
    state = RunState("lab-0abc12", 1, 1, tuple(actors.values()))
    return LiveLab.from_json(state, written.to_json())


@pytest.mark.parametrize(
    ("name", "actor"),
    [
        ("shop/web-0", "shop/web-0"),
        ("default/web-0", "default/web-0"),
        ("web-1", "web-1"),
        ("default/web-1", "web-1"),
        ("default/checkout.shop", "checkout.shop"),
        ("node1", "node1"),
    ],
)
def test_lab_exec_takes_a_pod_as_the_lab_or_a_scenario_names_it(live, name, actor):
    assert live.actor(name) == actor


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("web-0", "web-0 names more than one pod (default/web-0, shop/web-0): write NAMESPACE/web-0"),
        ("shop/web-1", "lab-0abc12 has no actor 'shop/web-1'; its actors are: checkout.shop, default/web-0, node1, "),
    ],
)
def test_lab_exec_of_an_ambiguous_or_unknown_pod_lists_the_candidates(live, name, said):
    with pytest.raises(LiveLabError) as info:
        live.actor(name)
    assert str(info.value).startswith(said), str(info.value)


def test_a_record_whose_alias_names_no_actor_is_no_live_lab(live):
    forged = live.to_json().replace('"default/web-1": "web-1"', '"default/web-1": "fabric"')
    assert forged != live.to_json() and LiveLab.from_json(live.state, forged) is None


def test_up_prints_actors_services_and_how_to_reach_them(topo):
    lines = summary(topo, "lab-0abc12")
    text = "\n".join(lines)
    assert lines[0].startswith("lab-0abc12: t (")
    assert "web-0" in text and "10.244.1.2" in text and "node2" in text and "192.168.56.100" in text
    assert "NodePort" in text and "lab exec --run lab-0abc12 client -- curl -s -m 3 http://192.168.56.12:" in text
    assert lines[-1] == "  lab down lab-0abc12"


@pytest.mark.parametrize(
    ("request_", "said"),
    [
        ({"from": "nobody", "to": "web:80"}, "lab probe --from nobody: unknown pod, node or external host 'nobody'"),
        ({"from": "client", "to": "web:8081"}, "lab probe --to web:8081: Service web has no port 8081; it has 80"),
        (
            {"from": "client", "to": "web:80", "via": "nodePort", "node": "node9"},
            "lab probe --node node9: unknown node 'node9'",
        ),
        ({"from": "client", "to": "web:80", "via": "nodePort"}, "lab probe --to web:80: `via: nodePort` needs"),
    ],
)
def test_an_ad_hoc_probe_is_refused_in_the_words_of_its_flags(tmp_path, request_, said):
    path = write(tmp_path, BASE)
    (variant,) = load_scenario(path).variants
    with pytest.raises(LiveLabError) as info:
        adhoc_probe(path, {}, variant, request_)
    assert str(info.value).startswith(said), str(info.value)
    assert "probes[" not in str(info.value)


def test_an_ad_hoc_probe_is_resolved_against_the_workload_the_live_lab_started_with(tmp_path):
    # A live lab runs none of the file's steps: a pod a later probe's step deletes is still there to probe from.
    path = write(
        tmp_path,
        BASE + "  - name: gone\n    before: [{delete: Pod/web-0}]\n    from: client\n"
        "    to: {service: web, port: http}\n    expect: {outcome: delivered}\n",
    )
    (variant,) = load_scenario(path).variants
    probe = adhoc_probe(path, {}, variant, {"from": "web-0", "to": "web:80"})
    assert probe.source == "web-0" and probe.name == "adhoc-1" and not probe.before


def test_every_printed_command_names_the_run_and_a_curl_gives_up(topo):
    """With another lab up, a command without --run fails ("2 live labs: give --run"); a curl to a node that
    drops the SYN (externalTrafficPolicy Local, no endpoint there) would hang without -m."""
    commands = [line.split("#")[0].strip() for line in summary(topo, "lab-0abc12") if line.startswith("  lab ")]
    for command in commands:
        if command.split()[1] in {"exec", "probe", "shell"}:
            assert command.split()[2:4] == ["--run", "lab-0abc12"], command
        if "curl" in command:
            assert "-m 3" in command, command


def test_a_printed_curl_says_what_the_scenarios_probe_expects(tmp_path):
    dropped = BASE.replace("expect: {outcome: delivered, source: node2}", "expect: {outcome: dropped}")
    (topo,) = load_scenario(write(tmp_path, dropped)).variants
    (curl,) = [line for line in summary(topo, "lab-0abc12") if "curl" in line]
    assert "http://192.168.56.12:" in curl  # where probe p goes: node2's NodePort
    assert "expected dropped: curl shows nothing, then exit 28 after 3 s (timed out)" in curl


def test_a_printed_curl_to_an_observe_probe_is_one_short_line(tmp_path):
    observed = BASE.replace("expect: {outcome: delivered, source: node2}", "expect: observe")
    (topo,) = load_scenario(write(tmp_path, observed)).variants
    (curl,) = [line for line in summary(topo, "lab-0abc12") if "curl" in line]
    assert curl.endswith("# web as probe p reaches it; observe: no expectation yet"), curl
    assert len(curl.split("#", 1)[1]) < 60, curl  # the command and a few words, not a paragraph


def test_lab_ls_names_the_variant_and_nothing_for_a_scenario_without_a_matrix():
    lab = LiveLab("lab-0abc12", "/s.yaml", "imported", {}, {"client": "lab-0abc12-client"}, 0.0, "")
    assert listed(lab, 5.0) == "lab-0abc12  imported  up 5 s  1 actors  keeper pid ?  /s.yaml"
    lab = LiveLab("lab-0abc12", "/s.yaml", "t", {"proxyMode": "ipvs"}, {}, 0.0, "")
    assert listed(lab, 5.0).startswith("lab-0abc12  t (proxyMode=ipvs)  up 5 s  ")


def test_lab_up_picks_the_first_variant_that_runs_here_and_says_why_it_passed_others_over(tmp_path):
    axes = {"proxyMode": ["ipvs", "nftables", "iptables"]}
    variants = list(load_scenario(write(tmp_path, BASE), axes).variants)
    reasons = {"ipvs": "the kernel has no ip_vs", "nftables": "no nft here"}
    topo, said = first_runnable("s.yaml", variants, lambda t: reasons.get(t.cluster.proxy_mode, ""))
    assert topo is variants[2]
    assert said[0].startswith("proxyMode=iptables: the first of 3 variants that runs here")
    assert said[1:] == [
        "  passed over proxyMode=ipvs: the kernel has no ip_vs",
        "  passed over proxyMode=nftables: no nft here",
    ]
    nothing, why = first_runnable("s.yaml", variants[:1], lambda t: "the kernel has no ip_vs")
    assert nothing is None and why == ["s.yaml (proxyMode=ipvs) cannot run here: the kernel has no ip_vs"]
