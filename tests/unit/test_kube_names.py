"""Names exactly as Kubernetes validates them: accepted at its limits, refused past them in words, and every field
that reaches iptables-restore or nft input refused at validation when it holds anything a rule could be made of."""

from __future__ import annotations

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.describe.names import DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN, PORT_NAME, refusal
from lab.realize.kernel_names import IFNAME_MAX, NETNS_ROOM, ifname, netns_part

NS63 = "n" * 63
SVC63 = "s" + "v" * 61 + "c"
DEPLOY251 = ".".join(["d" * 62] * 4)  # 251 characters: its replicas' names are 253


def at_limits() -> str:
    """BASE with its Deployment and Service in a 63-character namespace, the Service's name 63 characters, the
    Deployment's 251 (replica names of 253), and a 15-character container port name."""
    text = BASE.replace(
        "metadata: {name: web}\n    spec:\n      replicas",
        f"metadata: {{name: {DEPLOY251}, namespace: {NS63}}}\n    spec:\n      replicas",
    )
    text = text.replace(
        "metadata: {name: web}\n    spec:\n      type",
        f"metadata: {{name: {SVC63}, namespace: {NS63}}}\n    spec:\n      type",
    )
    text = text.replace("name: http, containerPort", "name: http-alternate1, containerPort")
    text = text.replace("targetPort: http}", "targetPort: http-alternate1}")
    return text.replace("to: {service: web,", f"to: {{service: {SVC63}, namespace: {NS63},")


def test_names_at_kubernetes_limits_load(tmp_path):
    assert len(DEPLOY251) == 251 and len("http-alternate1") == 15
    (variant,) = load_scenario(write(tmp_path, at_limits())).variants
    assert [len(p.name) for p in variant.pods] == [253, 253]
    (svc,) = variant.services
    assert (svc.name, svc.namespace) == (SVC63, NS63)
    assert len(svc.ports[0].endpoints) == 2


def test_a_replica_of_a_253_character_deployment_stays_a_valid_pod_name(tmp_path):
    longest = ".".join(["d" * 63] * 4)[:253]
    text = at_limits().replace(DEPLOY251, longest)
    pods = load_scenario(write(tmp_path, text)).variants[0].pods
    for pod in pods:
        assert refusal(DNS1123_SUBDOMAIN, "a pod name", pod.name) is None, pod.name
    assert len({p.name for p in pods}) == 2


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ("namespace: " + NS63, "namespace: " + NS63 + "n", "workload[0].metadata.namespace", "at most 63 characters"),
        (f"name: {SVC63},", f"name: {SVC63}x,", "workload[1].metadata.name", "Kubernetes' DNS-1035 label"),
        (f"name: {SVC63},", "name: 1web,", "workload[1].metadata.name", "starting with a letter"),
        (DEPLOY251, DEPLOY251 + "dd.x", "workload[0].metadata.name", "at most 253 characters"),
        (
            "name: http-alternate1, containerPort",
            "name: http-alternate12, containerPort",
            "workload[0].spec.template.spec.containers[0].ports[0].name",
            "IANA_SVC_NAME",
        ),
        (
            "name: http-alternate1, containerPort",
            "name: '8080', containerPort",
            "workload[0].spec.template.spec.containers[0].ports[0].name",
            "at least one letter",
        ),
        (
            "name: http-alternate1, containerPort",
            "name: http--alt, containerPort",
            "workload[0].spec.template.spec.containers[0].ports[0].name",
            "no two '-' in a row",
        ),
        ("{app: web}}", "{app: " + "w" * 64 + "}}", "workload[0].spec.selector.matchLabels", "label value"),
    ],
)
def test_names_past_kubernetes_limits_are_refused_in_words(tmp_path, old, new, field, words):
    text = at_limits()
    assert old in text
    error = error_for(tmp_path, text.replace(old, new, 1))
    assert error.field == field, str(error)
    assert words in error.message


# Each field that reaches rule text (a namespace, a Service's name, a port's name, a comment), holding what would
# end a quoted string or a line of iptables-restore or nft input and start a rule or a command of its own.
INJECTIONS = [
    'a" ; include "/etc/shadow',
    "a\n-A INPUT -j ACCEPT",
    "a b",
    "a'b",
    "a\n",
    'x" counter accept comment "',
]


@pytest.mark.parametrize("payload", INJECTIONS)
@pytest.mark.parametrize(
    ("old", "field"),
    [
        ("namespace: " + NS63 + "}\n    spec:\n      type", "workload[1].metadata.namespace"),
        (f"{{name: {SVC63},", "workload[1].metadata.name"),
        ("[{name: http, port: 80", "workload[1].spec.ports[0].name"),
        ("targetPort: http-alternate1}", "workload[1].spec.ports[0].targetPort"),
        ("[{name: http-alternate1, containerPort", "workload[0].spec.template.spec.containers[0].ports[0].name"),
        ("selector: {app: web}\n      ports", "workload[1].spec.selector"),
        ("- {name: node1,", "nodes[0].name"),
        ("- {name: client,", "externalHosts[0].name"),
    ],
)
def test_injection_through_a_name_is_refused_at_validation(tmp_path, payload, old, field):
    text = at_limits()
    assert old in text, old
    quoted = '"' + payload.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if old.startswith("namespace: "):
        new = "namespace: " + quoted + old[len("namespace: " + NS63) :]
    elif old.startswith("{name:"):
        new = "{name: " + quoted + ","
    elif old.startswith("[{name:"):
        new = "[{name: " + quoted + "," + old.split(",", 1)[1]
    elif old.startswith("targetPort"):
        new = f"targetPort: {quoted}}}"
    elif old.startswith("selector"):
        new = f"selector: {{app: {quoted}}}\n      ports"
    else:
        new = "- {name: " + quoted + ","
    error = error_for(tmp_path, text.replace(old, new, 1))
    assert error.field.startswith(field), str(error)
    assert "is at most" in error.message, str(error)


def test_an_endpoint_slice_port_name_is_a_dns_1123_label(tmp_path):
    text = BASE.replace(
        "  - kind: Service",
        """  - kind: EndpointSlice
    metadata: {name: web-x, labels: {kubernetes.io/service-name: web}}
    addressType: IPv4
    ports: [{name: 'http" accept', port: 8080}]
  - kind: Service""",
    )
    error = error_for(tmp_path, text)
    assert error.field == "workload[1].ports[0].name", str(error)
    assert "Kubernetes' DNS-1123 label" in error.message


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (DNS1123_LABEL, ["a", "0", "a-b", "9" * 63], ["", "-a", "a-", "A", "a.b", "a" * 64, "a_b", "a\n"]),
        (DNS1035_LABEL, ["a", "a-1", "a" * 63], ["1a", "a-", "a" * 64, "a.b"]),
        (DNS1123_SUBDOMAIN, ["a.b", "a-b.c0", "a" * 253], ["a..b", ".a", "a.", "a.-b", "a" * 254]),
        (PORT_NAME, ["http", "h-2", "a" * 15, "1a"], ["", "123", "-a", "a-", "a--b", "A", "a" * 16, "a_b"]),
    ],
)
def test_each_rule_is_the_one_kubernetes_has(rule, good, bad):
    assert [g for g in good if refusal(rule, "x", g)] == []
    assert [b for b in bad if refusal(rule, "x", b) is None] == []


def test_kernel_names_fit_and_stay_apart():
    long = [f"{'p' * 240}-{i}" for i in range(3)] + ["web.v1-0", "a/web", "b/web", "node-with-a-long-name-1"]
    names = [ifname(n) for n in long]
    assert all(len(n) <= IFNAME_MAX and "/" not in n and "." not in n for n in names), names
    assert len(set(names)) == len(names)
    assert ifname("node1") == "node1" and ifname("web-0", "veth-") == "veth-web-0"
    parts = [netns_part(n) for n in long]
    assert all(len(p) <= NETNS_ROOM and "/" not in p for p in parts) and len(set(parts)) == len(parts)
    assert netns_part("a/web") == "a_web" and netns_part("node1") == "node1"


def test_a_deleted_replica_of_a_cut_name_is_replaced_by_a_scale_up(tmp_path):
    longest = ".".join(["d" * 63] * 4)[:253]
    text = at_limits().replace(DEPLOY251, longest)
    first = f"{longest[:251]}-0"
    steps = f"    before: [{{delete: Pod/{NS63}/{first}}}, {{scale: ReplicaSet/{NS63}/{longest}, replicas: 2}}]\n"
    text = text.replace("kind: Deployment", "kind: ReplicaSet").replace(
        "    to: {service:", steps + "    to: {service:"
    )
    (topo,) = load_scenario(write(tmp_path, text)).variants
    (probe,) = topo.probes
    assert sorted(p.name[-2:] for p in probe.before[-1].pods) == ["-1", "-2"]
