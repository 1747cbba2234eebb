"""Every input answered honestly: a bad scenario file gets an error naming the file, the line and the field,
never a traceback and never a silently different scenario."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import get_args

import pytest
from support.scenario import NODES, SERVICE_AND_PROBE
from support.timelimit import time_limit

from lab import cli
from lab.describe import readfile, yamlsrc
from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario
from lab.describe.resolve.matrix import MAX_VARIANTS
from lab.describe.schema import Outcome

BASE = (
    "name: t\n"
    + NODES
    + """\
workload:
  - kind: Pod
    metadata: {name: web, labels: {app: web}}
    spec: {nodeName: node1, containers: [{name: web, ports: [{name: http, containerPort: 8080}]}]}
"""
    + SERVICE_AND_PROBE
    + "    expect:\n      - {outcome: delivered, backend: web}\n"
)


def write(tmp_path: Path, text: str | bytes, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def error_for(tmp_path: Path, text: str | bytes, matrix: dict | None = None) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text), matrix)
    return info.value


def yaml_error_for(tmp_path: Path, text: str) -> ScenarioError:
    """The error of YAML's own bounds, in a file that need not be a scenario."""
    with pytest.raises(ScenarioError) as info:
        yamlsrc.load_yaml(write(tmp_path, text))
    return info.value


def edited(old: str, new: str, text: str = BASE) -> str:
    assert old in text
    return text.replace(old, new, 1)


# --- YAML: only plain values, each error at its line --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        (b"name: t\nname2: \xff\n", 2, "", "not UTF-8 text (byte 8 of the line is not)"),
        (b"\xff\xfeU\x00T\x00F\x00", 1, "", "not UTF-8 text"),  # UTF-16
        (b"name: t\x00\n", 1, "", "a NUL byte (a binary file?) cannot appear in YAML"),
        (b"name: t\n\x07: x\n", 2, "", "a control character cannot appear in YAML (column 1)"),
        (b"name: !foo x\n", 1, "name", "the tag !foo is not supported"),
        (b"a: !!python/object:os.system x\n", 1, "a", "the tag !!python/object:os.system is not supported"),
        (b"a: !!python/name:os.system\n", 1, "a", "the tag !!python/name:os.system is not supported"),
        (b"a: !!set {x}\n", 1, "a", "the tag !!set is not supported"),
        (b"a: !!binary aGVsbG8=\n", 1, "a", "the tag !!binary is not supported"),
        (b"a: &x {b: 1}\nc:\n  <<: *x\n", 3, "c", "merge keys (<<) are not supported"),
        (b'name: !!int "abc"\n', 1, "name", "'abc' is not a valid !!int"),
        (b'name: !!float "abc"\n', 1, "name", "'abc' is not a valid !!float"),
        (b'name: !!bool "maybe"\n', 1, "name", "'maybe' is not a valid !!bool"),
        (b'name: !!null "x"\n', 1, "name", "'x' is not a valid !!null"),
        (b"a: " + b"1" * 5000 + b"\n", 1, "a", "cannot read '1111"),
        (b"name: a\nname: b\n", 2, "name", "duplicate key 'name' (first at line 1)"),
        (b"a:\n  b: 1\n  c: 2\n  b: 3\n", 4, "a.b", "duplicate key 'b' (first at line 2)"),
        (b"1: a\n'1': b\n", 2, "1", "duplicate key '1'"),
        (b"? [a]\n: 1\n", 1, "", "a key must be a plain value"),
        (b"~: 1\n", 1, "", "a key must be a name, not None"),
        (b"a: &a [*a]\n", 1, "", "alias *a is inside the value it names (a recursive alias)"),
        (b"a: &a {b: [{c: *a}]}\n", 1, "", "alias *a is inside the value it names"),
        (b"a: [1\n", 2, "", "not valid YAML"),
        (b"a: *nothing\n", 1, "", "not valid YAML: found undefined alias (column 4)"),
        (b"a: 1\n---\nb: 2\n", 2, "", "a second YAML document starts here (---): this file is one document"),
        (b"", None, "", "the file is empty"),
    ],
)
def test_yaml_beyond_plain_values_is_refused_at_its_line(tmp_path, text, line, field, message):
    with pytest.raises(ScenarioError) as info:
        yamlsrc.load_yaml(write(tmp_path, text))
    error = info.value
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message
    assert error.file == str(tmp_path / "s.yaml")


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path):
    error = error_for(tmp_path, "name: " + "[" * 600 + "]" * 600 + "\n")
    assert (error.line, error.message) == (1, f"nested deeper than {yamlsrc.MAX_DEPTH} levels")
    nested = "name: " + "{a: " * 600 + "1" + "}" * 600 + "\n"
    assert "nested deeper" in error_for(tmp_path, nested).message


def test_aliases_cannot_nest_past_the_depth_bound(tmp_path):
    # Each anchor is shallow enough; the alias at the bottom of the next one makes the whole too deep.
    text = "x0: &x0 " + "[" * 40 + "1" + "]" * 40 + "\nx1: &x1 " + "[" * 40 + "*x0" + "]" * 40 + "\n"
    error = yaml_error_for(tmp_path, text)
    assert (error.line, error.field) == (2, "x1") and "nested deeper than 64 levels once aliases" in error.message


def test_an_alias_bomb_stops_at_the_value_bound(tmp_path):
    rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        rows.append(f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    text = "\n".join(rows) + "\n"
    assert len(text) < 400  # 9**9 values, well past 4 GB once expanded
    error = yaml_error_for(tmp_path, text)
    assert (error.line, error.field) == (6, "f")
    assert error.message == f"expands to more than {yamlsrc.MAX_VALUES} values (aliases repeat what they name)"


def test_plain_aliases_and_dates_still_load(tmp_path):
    source = yamlsrc.load_yaml(write(tmp_path, "a: &x {b: 1}\nc: *x\nd: 2024-13-45\ne: !!str 12\nf: !!int '12'\n"))
    assert source.data == {"a": {"b": 1}, "c": {"b": 1}, "d": "2024-13-45", "e": "12", "f": 12}
    assert source.lines[("c", "b")] == 1  # an alias's values are where its anchor wrote them


def test_a_file_larger_than_the_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(readfile, "MAX_BYTES", 1024)
    error = error_for(tmp_path, "name: t\n" * 200)
    assert (error.line, error.message) == (None, "more than 1024 bytes, the most lab reads from one file of this kind")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.mkdir(), "a directory, not a regular file"),
        (lambda p: os.mkfifo(p), "a FIFO (named pipe), not a regular file"),  # its open would wait for a writer
    ],
    ids=["directory", "fifo"],
)
def test_what_is_no_regular_file_is_refused_unread(tmp_path, make, said):
    path = tmp_path / "scenario.yaml"
    make(path)
    with pytest.raises(ScenarioError) as info, time_limit(5):  # read unbounded, a FIFO blocks
        load_scenario(path)
    assert str(info.value) == f"{path}: {said}: give a file"


def test_a_device_is_refused_unread():
    with pytest.raises(ScenarioError) as info, time_limit(5):  # read unbounded, /dev/zero grows until MemoryError
        load_scenario("/dev/zero")
    assert str(info.value) == "/dev/zero: a character device, not a regular file: give a file"


# --- validation: pods, ports, the matrix --------------------------------------------------------------------------

THREE_PODS = edited(
    "  - kind: Service\n",
    "".join(
        f"  - {{kind: Pod, metadata: {{name: p{i}, labels: {{app: web}}}}, spec: {{nodeName: node1}}}}\n"
        for i in range(2)
    )
    + "  - kind: Service\n",
    edited("podCIDR: 10.244.1.0/24}", "podCIDR: 10.244.1.0/30}"),
)


def test_more_pods_than_the_pod_cidr_holds_names_the_node(tmp_path):
    error = error_for(tmp_path, THREE_PODS)
    assert (error.line, error.field) == (11, "workload[1]"), str(error)
    assert error.message == (
        "node1's podCIDR 10.244.1.0/30 has room for 1 pods, and 3 are placed there; no address is left for p0 "
        "(give node1 a larger podCIDR)"
    )


def test_260_pods_do_not_fit_a_24(tmp_path):
    deployments = "".join(
        f"  - {{kind: Deployment, metadata: {{name: d{i}}}, spec: {{replicas: 52,"
        f" selector: {{matchLabels: {{app: web}}}},"
        f" template: {{metadata: {{labels: {{app: web}}}}, spec: {{nodeName: node1}}}}}}}}\n"
        for i in range(5)
    )
    error = error_for(tmp_path, edited("  - kind: Service\n", deployments + "  - kind: Service\n"))
    assert error.field == "workload[5]" and "node1's podCIDR 10.244.1.0/24 has room for 253 pods, and 261" in str(error)


def test_routed_tunnel_pods_fit_one_more(tmp_path):
    # No bridge: only the network address (the tunnel's) and the broadcast address are no pod's.
    text = edited("name: t\n", "name: t\ncluster: {cni: routed-tunnel}\n", THREE_PODS)
    error = error_for(tmp_path, text)
    assert "has room for 2 pods, and 3 are placed there; no address is left for p1" in error.message


@pytest.mark.parametrize(
    ("ip", "message"),
    [
        ("10.244.1.1", "10.244.1.1 is reserved in 10.244.1.0/24: network, broadcast or node1's own"),
        ("10.244.1.255", "10.244.1.255 is reserved"),
        ("10.244.2.5", "10.244.2.5 is outside node1's podCIDR 10.244.1.0/24"),
    ],
)
def test_a_pod_ip_must_be_a_free_address_of_its_node(tmp_path, ip, message):
    error = error_for(
        tmp_path, edited("containerPort: 8080}]}]}\n", f"containerPort: 8080}}]}}]}}\n    status: {{podIP: {ip}}}\n")
    )
    assert (error.line, error.field) == (11, "workload[0].status.podIP") and message in error.message


def test_two_pods_with_one_pod_ip_are_refused(tmp_path):
    twin = "  - {kind: Pod, metadata: {name: twin}, spec: {nodeName: node1}, status: {podIP: 10.244.1.9}}\n"
    text = edited("  - kind: Service\n", twin + twin.replace("twin", "twin2") + "  - kind: Service\n")
    error = error_for(tmp_path, text)
    assert (error.line, error.field) == (12, "workload[2].status.podIP")
    assert error.message == "10.244.1.9 is already a pod's podIP at line 11"


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("targetPort: http}", "targetPort: 0}", "workload[1].spec.ports[0].targetPort", "a number of at least 1"),
        (
            "targetPort: http}",
            "targetPort: 70000}",
            "workload[1].spec.ports[0].targetPort",
            "a number of at most 65535",
        ),
        (
            "type: NodePort",
            "type: NodePort\n      healthCheckNodePort: 80",
            "workload[1].spec.healthCheckNodePort",
            "30000-32767",
        ),
        ("port: http, via", "port: 70000, via", "probes[0].to.port", "a number of at most 65535"),
        (
            "type: NodePort",
            "type: NodePort\n      sessionAffinity: ClientIP\n"
            "      sessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}",
            "workload[1].spec.sessionAffinityConfig.clientIP.timeoutSeconds",
            "a number of at least 1",
        ),
    ],
)
def test_ports_outside_their_range_are_refused(tmp_path, old, new, field, message):
    error = error_for(tmp_path, edited(old, new))
    assert error.field == field, str(error)
    assert message in error.message


MATRIX = BASE + "matrix:\n  proxyMode: [iptables, ipvs]\n  externalTrafficPolicy: [Cluster, Local]\n"


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "message"),
    [
        (
            "[iptables, ipvs]",
            "[iptables, ipvs, iptables]",
            24,
            "matrix.proxyMode[2]",
            "'iptables' is listed twice (line 24)",
        ),
        (
            "[iptables, ipvs]",
            "[iptables, bogus]",
            24,
            "matrix.proxyMode[1]",
            "'iptables', 'ipvs' or 'nftables', not 'bogus'",
        ),
        ("[iptables, ipvs]", "\n    - iptables\n    - bogus", 26, "matrix.proxyMode[1]", "not 'bogus'"),
        (
            "[Cluster, Local]",
            "[Cluster, Lokal]",
            25,
            "matrix.externalTrafficPolicy[1]",
            "'Cluster' or 'Local', not 'Lokal'",
        ),
        ("proxyMode: [iptables, ipvs]", "kubeVersion: ['1.31', '1.12']", 24, "matrix.kubeVersion[1]", "1.12"),
        ("proxyMode: [iptables, ipvs]", "proxyMode: []", 24, "matrix.proxyMode", "needs at least one value"),
        ("proxyMode: [iptables, ipvs]", "proxyMod: [iptables]", 24, "matrix.proxyMod", "unknown matrix axis"),
    ],
)
def test_a_bad_matrix_value_is_named_at_its_line(tmp_path, old, new, line, field, message):
    error = error_for(tmp_path, edited(old, new, MATRIX))
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message


def test_a_matrix_past_the_bound_is_refused_with_its_size(tmp_path):
    versions = ", ".join(f"'1.{v}'" for v in range(200))
    error = error_for(tmp_path, edited("proxyMode: [iptables, ipvs]", f"kubeVersion: [{versions}]", MATRIX))
    assert (error.line, error.field) == (23, "matrix")
    assert error.message == f"the matrix expands to 400 variants; at most {MAX_VARIANTS} are run from one file"


@pytest.mark.parametrize(
    ("matrix", "flag", "message"),
    [
        ({"proxyMode": ["iptables", "bogus"]}, "--matrix proxyMode=iptables,bogus", "'bogus': expected 'iptables'"),
        ({"kubeVersion": ["1.12"]}, "--matrix kubeVersion=1.12", "'1.12': kube-proxy 1.12"),
        ({"externalTrafficPolicy": ["Lokal"]}, "--matrix externalTrafficPolicy=Lokal", "'Lokal': expected 'Cluster'"),
        ({"proxyMod": ["ipvs"]}, "--matrix proxyMod=ipvs", "unknown matrix axis"),
        ({"proxyMode": ["ipvs", "ipvs"]}, "--matrix proxyMode=ipvs,ipvs", "'ipvs' is listed twice"),
    ],
)
def test_a_bad_command_line_matrix_value_names_the_flag_not_the_file(tmp_path, matrix, flag, message):
    error = error_for(tmp_path, MATRIX, matrix)
    assert (error.file, error.line, error.field) == (flag, None, ""), str(error)
    assert message in error.message


def test_a_command_line_matrix_past_the_bound_names_the_flag_and_the_file(tmp_path):
    values = [f"1.{v}" for v in range(200)]
    error = error_for(tmp_path, MATRIX, {"kubeVersion": values})
    assert error.file == f"--matrix kubeVersion={','.join(values)}" and "expands to 800 variants" in error.message
    assert str(tmp_path / "s.yaml") in error.message


# --- Kubernetes manifests, as kubectl apply --validate=strict reads them ------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "message"),
    [
        (
            "type: NodePort",
            "type: NodePort\n      externalTrafficPolcy: Local",
            15,
            "workload[1].spec.externalTrafficPolcy",
            "unknown field: a Kubernetes ServiceSpec has no 'externalTrafficPolcy'; "
            "did you mean externalTrafficPolicy?",
        ),
        (
            "spec: {nodeName: node1,",
            "spec: {nodename: node1,",
            10,
            "workload[0].spec.nodename",
            "a Kubernetes PodSpec has no 'nodename'; did you mean nodeName?",
        ),
        (
            "{name: web, ports:",
            "{name: web, imagePullPolcy: Always, ports:",
            10,
            "workload[0].spec.containers[0].imagePullPolcy",
            "did you mean imagePullPolicy?",
        ),
        (
            "metadata: {name: web, labels:",
            "metadata: {name: web, lables: {}, labels:",
            9,
            "workload[0].metadata.lables",
            "a Kubernetes ObjectMeta has no 'lables'; did you mean labels?",
        ),
        (
            "metadata: {name: web}",
            "metadata: {name: web}\n    bogus: 1",
            13,
            "workload[1].bogus",
            "a Kubernetes Service has no 'bogus'",
        ),
        (
            "ports: [{name: http, port: 80, targetPort: http}]",
            "ports: {name: http, port: 80, targetPort: http}",
            16,
            "workload[1].spec.ports",
            "expected a list",
        ),
        ("{name: web, ports:", "{name: [web], ports:", 10, "workload[0].spec.containers[0].name", "a single value"),
        ("labels: {app: web}}", "labels: [app]}", 9, "workload[0].metadata.labels", "expected a mapping"),
    ],
)
def test_manifests_are_checked_against_the_kubernetes_api(tmp_path, old, new, line, field, message):
    error = error_for(tmp_path, edited(old, new))
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message


KUBECTL_GET = (
    "name: t\n"
    + NODES
    + """\
workload:
  - apiVersion: apps/v1
    kind: Deployment
    metadata:
      annotations: {deployment.kubernetes.io/revision: "1"}
      creationTimestamp: "2024-05-01T10:00:00Z"
      generation: 1
      labels: {app: web}
      managedFields:
        - apiVersion: apps/v1
          fieldsType: FieldsV1
          fieldsV1:
            f:spec:
              f:replicas: {}
              f:template:
                f:spec:
                  f:containers:
                    k:{"name":"web"}:
                      .: {}
                      f:image: {}
          manager: kubectl-client-side-apply
          operation: Update
          time: "2024-05-01T10:00:00Z"
      name: web
      namespace: default
      resourceVersion: "12345"
      uid: 0b9c4a0e-6f0c-4a57-9d41-3e1f2b7c9a10
    spec:
      progressDeadlineSeconds: 600
      replicas: 2
      revisionHistoryLimit: 10
      selector: {matchLabels: {app: web}}
      strategy:
        rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
        type: RollingUpdate
      template:
        metadata:
          creationTimestamp: null
          labels: {app: web}
        spec:
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}]
          nodeSelector: {kubernetes.io/hostname: node2}
          containers:
            - name: web
              image: nginx:1.25
              imagePullPolicy: IfNotPresent
              command: [nginx, -g, daemon off;]
              env: [{name: MODE, value: prod}, {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]
              ports: [{containerPort: 8080, name: http, protocol: TCP}]
              readinessProbe:
                httpGet: {path: /healthz, port: http, scheme: HTTP}
                periodSeconds: 10
              resources:
                limits: {cpu: 500m, memory: 128Mi}
                requests: {cpu: 1, memory: 64Mi}
              securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
              terminationMessagePath: /dev/termination-log
              terminationMessagePolicy: File
              volumeMounts: [{mountPath: /etc/web, name: config}]
          dnsPolicy: ClusterFirst
          restartPolicy: Always
          schedulerName: default-scheduler
          securityContext: {}
          terminationGracePeriodSeconds: 30
          tolerations: [{effect: NoSchedule, key: node-role.kubernetes.io/control-plane, operator: Exists}]
          volumes: [{configMap: {defaultMode: 420, name: web-config}, name: config}]
    status:
      availableReplicas: 2
      conditions:
        - {lastTransitionTime: "2024-05-01T10:00:05Z", lastUpdateTime: "2024-05-01T10:00:05Z", message: ok,
           reason: MinimumReplicasAvailable, status: "True", type: Available}
      observedGeneration: 1
      readyReplicas: 2
      replicas: 2
      updatedReplicas: 2
  - apiVersion: v1
    kind: Service
    metadata:
      annotations: {kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","kind":"Service"}'}
      creationTimestamp: "2024-05-01T10:00:00Z"
      name: web
      namespace: default
      resourceVersion: "12350"
      uid: 5f1e2d3c-0000-4000-8000-000000000001
    spec:
      allocateLoadBalancerNodePorts: true
      clusterIP: 10.96.0.50
      clusterIPs: [10.96.0.50]
      externalTrafficPolicy: Cluster
      internalTrafficPolicy: Cluster
      ipFamilies: [IPv4]
      ipFamilyPolicy: SingleStack
      ports: [{name: http, nodePort: 30080, port: 80, protocol: TCP, targetPort: http}]
      selector: {app: web}
      sessionAffinity: None
      type: LoadBalancer
    status:
      loadBalancer:
        ingress: [{ip: 203.0.113.10, ipMode: VIP, ports: [{port: 80, protocol: TCP}]}]
probes:
  - name: p
    from: client
    to: {service: web, port: http, via: loadBalancer}
    expect: {outcome: delivered}
"""
)


def test_a_real_manifest_from_kubectl_get_is_accepted(tmp_path):
    topo = load_scenario(write(tmp_path, KUBECTL_GET)).variants[0]
    assert [(p.name, p.node) for p in topo.pods] == [("web-0", "node2"), ("web-1", "node2")]
    assert topo.services[0].cluster_ip == "10.96.0.50"


def test_nodes_carry_the_labels_kubelet_gives_them(tmp_path):
    text = edited("podCIDR: 10.244.2.0/24}", "podCIDR: 10.244.2.0/24, labels: {zone: b}}")
    topo = load_scenario(write(tmp_path, text), arch="arm64").variants[0]
    labels = dict(topo.nodes[1].labels)
    assert labels["kubernetes.io/hostname"] == "node2" and labels["kubernetes.io/os"] == "linux"
    assert labels["zone"] == "b" and labels["kubernetes.io/arch"] == "arm64"  # the machine's, as the runner read it
    # Described for no machine: describe reads none, so no architecture.
    assert "kubernetes.io/arch" not in dict(load_scenario(write(tmp_path, text)).variants[0].nodes[1].labels)
    selected = edited("spec: {nodeName: node1,", "spec: {nodeSelector: {kubernetes.io/hostname: node2},")
    assert load_scenario(write(tmp_path, selected)).variants[0].pods[0].node == "node2"


# --- the scenario's own fields --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "message"),
    [
        (
            "- {outcome: delivered,",
            "- {outcome: maybe,",
            22,
            "probes[0].expect[0].outcome",
            "expected 'delivered'",
        ),
        ("- {outcome: delivered,", "- {outcome: maybe,", 22, "probes[0].expect[0].outcome", "not 'maybe'"),
        ("- {outcome: delivered,", "- {outcme: dropped,", 22, "probes[0].expect[0].outcme", "did you mean outcome?"),
        ("externalHosts:", "externalHost:", 5, "externalHost", "unknown field; did you mean externalHosts?"),
        ("- {name: client,", "- {nmae: client,", 6, "externalHosts[0].nmae", "did you mean name?"),
        ("to: {service: web,", "to: {servce: web,", 20, "probes[0].to.servce", "did you mean service?"),
    ],
)
def test_scenario_fields_are_named_with_the_allowed_values(tmp_path, old, new, line, field, message):
    error = error_for(tmp_path, edited(old, new))
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message


def test_an_outcome_error_lists_every_allowed_value(tmp_path):
    message = error_for(tmp_path, edited("- {outcome: delivered,", "- {outcome: maybe,")).message
    assert all(f"'{value}'" in message for value in get_args(Outcome))


# --- lab validate --------------------------------------------------------------------------------------------------


def test_validate_reports_every_file(tmp_path, capsys):
    good = write(tmp_path, BASE, "good.yaml")
    bad1 = write(tmp_path, b"name: !foo x\n", "bad1.yaml")
    bad2 = write(tmp_path, edited("externalHosts:", "externalHost:"), "bad2.yaml")
    with pytest.raises(SystemExit) as info:
        cli.main(["validate", str(bad1), str(good), str(bad2)])
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert f"{good}: ok (1 variant(s), 1 probe(s))" in out
    said = " ".join(err.split())
    assert f"{bad1}:1: name: the tag !foo is not supported" in said
    assert f"{bad2}:5: externalHost: unknown field" in said
    assert "Traceback" not in said


def test_a_service_cidr_with_no_free_address_is_named_at_the_service(tmp_path):
    error = error_for(tmp_path, edited("name: t\n", "name: t\ncluster: {serviceCIDR: 10.96.0.1/32}\n"))
    assert error.field.endswith("spec.clusterIP"), str(error)
    assert (
        error.message
        == "no address of serviceCIDR 10.96.0.1/32 is left to allocate; give one explicitly or widen the range"
    )


def test_replicas_are_bounded_by_the_pod_cidrs_not_a_fixed_cap(tmp_path):
    """300 replicas over two /24 nodes are placed (the old cap was 64); a billion is refused before any is."""
    deployment = (
        "  - kind: Deployment\n    metadata: {name: many}\n    spec:\n      replicas: REPLICAS\n"
        "      selector: {matchLabels: {app: many}}\n"
        "      template: {metadata: {labels: {app: many}}, spec: {containers: [{name: c}]}}\n"
    )
    text = BASE.replace("workload:\n", "workload:\n" + deployment)
    (topo,) = load_scenario(write(tmp_path, text.replace("REPLICAS", "300"))).variants
    assert len([p for p in topo.pods if p.name.startswith("many-")]) == 300
    error = error_for(tmp_path, text.replace("REPLICAS", "1000000000"))
    assert error.field == "workload[0].spec.replicas" and "all nodes' podCIDRs together hold 506 pods" in error.message
