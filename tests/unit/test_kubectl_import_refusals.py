"""`lab import` on dumps no cluster printed, or printed in a form the import once misread: each is refused in words
naming the input's file, line, object and field (never a traceback, never the temporary file the scenario is
checked in), or accepted and said; and `-o` writes the scenario whole or not at all."""

from __future__ import annotations

import argparse
import copy
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.describe.errors import ScenarioError
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.proxyconfig import go_duration
from lab.describe.kubectl.scenario import Imported, Options, import_cluster
from lab.describe.releases import check_version
from lab.import_command import run_import, write_output

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "kubectl" / "nodeport-source-ip"
DUMP, KUBE_PROXY, VERSION = (str(FIXTURE / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml"))
BASE = yaml.safe_load(Path(DUMP).read_text())


def imported(files: list[str], **options: Any) -> Imported:
    return import_cluster(read_inputs(files), Options(**options))


def refusal(files: list[str], **options: Any) -> str:
    with pytest.raises(ScenarioError) as info:
        imported(files, **options)
    return str(info.value)


def command_refusal(files: list[str], output: str | None = None) -> pytest.ExceptionInfo[ScenarioError]:
    """What `lab import FILES [-o OUTPUT]` refuses, the scenario checked as the command checks it."""
    args = argparse.Namespace(
        files=files, output=output, service=[], kube_version=None, anonymize=False, name="imported", nodes=None
    )
    with pytest.raises(ScenarioError) as info:
        run_import(args, lambda _line: None)
    return info


def edited(tmp_path: Path, edit: Callable[[dict], object], name: str = "dump.yaml") -> str:
    """The fixture's dump with `edit` applied, as a file."""
    data = copy.deepcopy(BASE)
    edit(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def item(data: dict, kind: str, name: str) -> dict:
    return next(i for i in data["items"] if i["kind"] == kind and i["metadata"]["name"] == name)


def line_of(path: str, text: str, after: str = "") -> int:
    """The number of the first line that starts with `text` (but for indentation and a list's "- ") after the first
    that starts with `after`."""
    lines = [line.strip().removeprefix("- ") for line in Path(path).read_text().splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith(after))
    return next(i for i, line in enumerate(lines[start:], start) if line.startswith(text)) + 1


def written(tmp_path: Path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def notes_about(result: Imported, *words: str) -> list[str]:
    return [n for n in result.notes if all(w in n for w in words)]


# --- tracebacks seen -----------------------------------------------------------------------------------------------


def test_a_node_without_podcidr_where_no_block_is_free_is_refused(tmp_path):
    """node1's podCIDR is the whole /16 pod network: no /24 is left for node2, which has none (StopIteration)."""

    def edit(data: dict) -> None:
        node1, node2 = item(data, "Node", "node1"), item(data, "Node", "node2")
        node1["spec"]["podCIDR"], node1["spec"]["podCIDRs"] = "10.244.0.0/16", ["10.244.0.0/16"]
        del node2["spec"]["podCIDR"], node2["spec"]["podCIDRs"]

    dump = edited(tmp_path, edit)
    said = refusal([dump, KUBE_PROXY, VERSION])
    assert said.startswith(f"{dump}:{line_of(dump, 'spec:', after='name: node2')}: Node node2: spec.podCIDR: ")
    assert "no IPv4 podCIDR, and the cluster's pod network 10.244.0.0/16 has no /24 left" in said


def test_a_node_without_podcidr_in_a_pod_network_smaller_than_a_block_is_refused(tmp_path):
    """kube-proxy's clusterCIDR, a /25, holds every podCIDR given: node2 gets no block of it (a /24 of a /25 was a
    ValueError)."""

    def edit(data: dict) -> None:
        for name, cidr in (("node1", "10.244.1.0/26"), ("node3", "10.244.1.64/26")):
            item(data, "Node", name)["spec"] |= {"podCIDR": cidr, "podCIDRs": [cidr]}
        del item(data, "Node", "node2")["spec"]["podCIDRs"], item(data, "Node", "node2")["spec"]["podCIDR"]

    conf = written(tmp_path, "kind: KubeProxyConfiguration\nclusterCIDR: 10.244.1.0/25\n", "conf.yaml")
    said = refusal([edited(tmp_path, edit), conf, VERSION])
    assert "Node node2: spec.podCIDR: no IPv4 podCIDR, and the cluster's pod network 10.244.1.0/25 has no /25" in said


@pytest.mark.parametrize(
    "version",
    [
        "1." + "9" * 5000,  # int() of more than 4300 digits: ValueError
        "",  # was taken as no flag: the version file's release used
        "1.\u0663\u0661",  # Arabic-Indic digits: int() reads 31
        "1.\uff13\uff11",  # fullwidth digits: likewise
        " 1.31",
    ],
    ids=["5000-digits", "empty", "arabic-indic", "fullwidth", "space"],
)
def test_a_kube_version_flag_that_is_no_release_is_refused(version):
    said = refusal([DUMP, KUBE_PROXY, VERSION], kube_version=version)
    assert said.startswith("lab import: --kube-version: expected 1.MINOR such as 1.31, got ")
    assert len(said) < 200


@pytest.mark.parametrize(
    "version",
    ["v1." + "9" * 5000, "v1.\u0663\u0661.2", "v\uff11.31.2", "v1.031.2", "v1.31.2\n"],
    ids=["5000-digits", "arabic-indic", "fullwidth", "leading-zero", "newline"],
)
def test_a_git_version_that_is_no_release_is_refused_at_its_line(tmp_path, version):
    version_file = written(tmp_path, yaml.safe_dump({"serverVersion": {"gitVersion": version}}), "v.yaml")
    said = refusal([DUMP, KUBE_PROXY, version_file])
    assert said.startswith(
        f"{version_file}:2: object: serverVersion.gitVersion: expected a version such as v1.31.2, got "
    )
    assert len(said) < 250


def test_a_nodes_kube_proxy_version_that_is_no_release_is_refused_at_its_line(tmp_path):
    dump = edited(
        tmp_path, lambda d: item(d, "Node", "node2")["status"]["nodeInfo"].update(kubeProxyVersion="v1.3" * 999)
    )
    said = refusal([dump, KUBE_PROXY])
    line = line_of(dump, "kubeProxyVersion:", after="name: node2")
    assert said.startswith(f"{dump}:{line}: Node node2: status.nodeInfo.kubeProxyVersion: expected a version such as")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("9" * 400 + "h", "expected a duration such as 1h0m0s or 30s (Go's: at most 2562047h47m16s), got '999"),
        ("2562048h", "expected a duration"),  # one hour past Go's int64 of nanoseconds
        ("\u0661\u0662s", "expected a duration"),  # Arabic-Indic digits
        ("1e3s", "expected a duration"),
        ("30", "expected a duration"),
        ("-5s", "-5s: a timeout is not negative (kube-proxy refuses to start)"),
    ],
)
def test_a_udp_timeout_go_would_not_read_is_refused(tmp_path, value, said):
    conf = written(tmp_path, f"kind: KubeProxyConfiguration\nconntrack:\n  udpTimeout: {value!r}\n", "conf.yaml")
    refused = refusal([DUMP, conf, VERSION])
    assert refused.startswith(f"{conf}:3: KubeProxyConfiguration: conntrack.udpTimeout: {said}")
    assert len(refused) < 300


def test_go_durations_as_go_reads_them():
    assert [go_duration(t) for t in ("0", "-0", "1h0m0s", "1.5h", ".5s", "5.s", "+2m", "1\u00b5s", "1\u03bcs")] == [
        0,
        0,
        3600 * 10**9,
        5400 * 10**9,
        5 * 10**8,
        5 * 10**9,
        120 * 10**9,
        1000,
        1000,
    ]
    assert go_duration("2562047h47m16.854775807s") == 2**63 - 1
    assert go_duration("-2562047h47m16.854775808s") == -(2**63)
    for refused in ("", "s", ".s", "1", "1x", "1h-1s", "30s ", "2562047h47m16.854775808s", "0" * 5000 + "x"):
        assert go_duration(refused) is None, refused


def test_a_udp_timeout_longer_than_the_lab_sets_is_said_and_left_out(tmp_path):
    conf = written(tmp_path, "kind: KubeProxyConfiguration\nconntrack:\n  udpTimeout: 25h\n", "conf.yaml")
    result = imported([DUMP, conf, VERSION])
    assert "conntrack" not in result.scenario["cluster"]
    assert notes_about(result, f"{conf}:3:", "conntrack.udpTimeout: 90000 s: longer than the lab sets")


# --- -o: whole or nothing ------------------------------------------------------------------------------------------


def test_output_into_a_missing_directory_a_directory_or_a_device_is_refused(tmp_path):
    for target, said in [
        (tmp_path / "no" / "s.yaml", f"lab import: -o {tmp_path}/no/s.yaml: {tmp_path}/no: no such directory"),
        (tmp_path, f"lab import: -o {tmp_path}: not a regular file"),
        (Path("/dev/full"), "lab import: -o /dev/full: not a regular file"),
    ]:
        with pytest.raises(ScenarioError) as info:
            write_output(target, "name: x\n")
        assert str(info.value).startswith(said)
    assert os.listdir(tmp_path) == []


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_write_that_fails_leaves_the_old_file_and_nothing_else(tmp_path):
    """A file size limit makes the kernel refuse the write past 100 bytes (EFBIG), as a full disk would (ENOSPC)."""
    target = tmp_path / "s.yaml"
    target.write_text("old\n")
    code = "import sys; from pathlib import Path; from lab.import_command import write_output; "
    code += "write_output(Path(sys.argv[1]), 'x' * 4096)"
    done = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        cwd=REPO,
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
        check=False,
    )
    assert f"ScenarioError: lab import: -o {target}: not written: File too large" in done.stderr
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["s.yaml"]


def test_output_replaces_a_file_whole_with_the_users_mode(tmp_path):
    target = tmp_path / "s.yaml"
    target.write_text("old\n")
    write_output(target, "new\n")
    assert target.read_text() == "new\n"
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask
    assert os.listdir(tmp_path) == ["s.yaml"]


# --- silent acceptances --------------------------------------------------------------------------------------------


def _second_port(**port: Any) -> Callable[[dict], None]:
    """openresty's port again, as a second port with `port`'s fields changed."""

    def edit(data: dict) -> None:
        ports = item(data, "Service", "openresty")["spec"]["ports"]
        ports.append({**ports[0], **port})

    return edit


def _another_service(**spec: Any) -> Callable[[dict], None]:
    """A Service "other" like openresty, with `spec`'s fields changed."""

    def edit(data: dict) -> None:
        other = copy.deepcopy(item(data, "Service", "openresty"))
        other["metadata"]["name"] = "other"
        other["spec"] |= {"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.99"]} | spec
        data["items"].append(other)

    return edit


@pytest.mark.parametrize(
    ("edit", "where", "said"),
    [
        (
            _second_port(name="alt", port=81),
            ("nodePort: 30080", "name: alt"),
            "Service default/openresty: spec.ports[1].nodePort: 30080 (TCP) is ports[0]'s nodePort too: the API "
            "server refuses two ports of one Service with the same nodePort and protocol",
        ),
        (
            _second_port(name="alt", nodePort=30081),
            ("port: 80", "name: alt"),
            "Service default/openresty: spec.ports[1].port: 80 (TCP) is ports[0]'s port too: the API server refuses "
            "two ports of one Service with the same port and protocol",
        ),
        (
            _second_port(port=81, nodePort=30081),
            ("name: http", "nodePort: 30080"),
            "Service default/openresty: spec.ports[1].name: 'http' is ports[0]'s name too: the API server refuses two "
            "ports of one Service with the same name",
        ),
        (
            _second_port(name="", port=81, nodePort=30081),
            ("name: ''", "nodePort: 30080"),
            "Service default/openresty: spec.ports[1].name: missing: the API server requires a name of each port",
        ),
        (
            _another_service(),
            ("nodePort: 30080", "name: other"),
            "Service default/other: spec.ports[0].nodePort: 30080 is also Service default/openresty's",
        ),
        (
            _another_service(ports=[{"name": "x", "port": 80, "protocol": "UDP"}], healthCheckNodePort=30080),
            ("healthCheckNodePort: 30080", "name: other"),
            "Service default/other: spec.healthCheckNodePort: 30080 is also Service default/openresty's",
        ),
        (
            _another_service(clusterIPs=["10.96.148.27"], ports=[{"name": "x", "port": 80, "protocol": "TCP"}]),
            ("10.96.148.27", "name: other"),
            "Service default/other: spec.clusterIPs[0]: 10.96.148.27 is also Service default/openresty's",
        ),
    ],
    ids=["node-port", "port", "name", "no-name", "node-port-of-two", "health-check-node-port", "cluster-ip-of-two"],
)
def test_ports_and_addresses_no_api_server_gives_twice_are_refused(tmp_path, edit, where, said):
    dump = edited(tmp_path, edit)
    assert refusal([dump, KUBE_PROXY, VERSION]).startswith(f"{dump}:{line_of(dump, where[0], after=where[1])}: {said}")


def test_one_node_port_for_tcp_and_udp_is_accepted(tmp_path):
    dump = edited(tmp_path, _second_port(name="dns", protocol="UDP"))
    written = imported([dump, KUBE_PROXY, VERSION]).scenario["workload"]
    service = next(m for m in written if m["kind"] == "Service" and m["metadata"]["name"] == "openresty")
    assert [(p["nodePort"], p["protocol"]) for p in service["spec"]["ports"]] == [(30080, "TCP"), (30080, "UDP")]


def _twin(phase: str) -> Callable[[dict], None]:
    """A second pod at openresty's address, in `phase`."""

    def edit(data: dict) -> None:
        twin = copy.deepcopy(item(data, "Pod", "openresty"))
        twin["metadata"]["name"] = "twin"
        twin["status"]["phase"] = phase
        data["items"].append(twin)

    return edit


def test_two_running_pods_with_one_address_are_refused(tmp_path):
    dump = edited(tmp_path, _twin("Running"))
    said = refusal([dump, KUBE_PROXY, VERSION])
    first = line_of(dump, "podIP: 10.244.1.2")
    second = line_of(dump, "podIP: 10.244.1.2", after="name: twin")
    assert said.startswith(f"{dump}:{second}: Pod default/twin: status.podIP: 10.244.1.2 is also the address of Pod ")
    assert f"default/openresty ({dump} at line {first}), running too" in said


def test_a_finished_pod_and_host_network_pods_share_addresses_legitimately(tmp_path):
    """A Succeeded pod's address is free for another; every hostNetwork pod has its node's (the fixture's
    kube-apiserver, kube-proxy and kindnet pods on node1 share 192.168.56.11)."""
    result = imported([edited(tmp_path, _twin("Succeeded")), KUBE_PROXY, VERSION])
    pods = [m["metadata"]["name"] for m in result.scenario["workload"] if m["kind"] == "Pod"]
    assert "openresty" in pods and "twin" not in pods


def test_two_version_files_that_disagree_are_refused(tmp_path):
    other = written(tmp_path, Path(VERSION).read_text().replace("gitVersion: v1.31.2", "gitVersion: v1.30.6"), "v.yaml")
    said = refusal([DUMP, KUBE_PROXY, VERSION, other])
    line = line_of(other, "gitVersion: v1.30.6", after="serverVersion")
    first = line_of(VERSION, "gitVersion", after="serverVersion")
    assert said == (
        f"{other}:{line}: object: serverVersion.gitVersion: 1.30, but {VERSION} at line {first} says 1.31: give one "
        "cluster's version (or --kube-version 1.MINOR)"
    )
    same = written(tmp_path, Path(VERSION).read_text().replace("v1.31.2", "v1.31.4-eks-1"), "same.yaml")
    assert imported([DUMP, KUBE_PROXY, VERSION, same]).scenario["cluster"]["kubeVersion"] == "1.31"


@pytest.mark.parametrize("value", ["10.0.0.1", "fd00::1", "10.0.0.0/", "primary/24"])
def test_node_port_addresses_without_a_prefix_length_are_refused(tmp_path, value):
    conf = written(tmp_path, f"kind: KubeProxyConfiguration\nnodePortAddresses: [{value!r}]\n", "conf.yaml")
    said = refusal([DUMP, conf, VERSION])
    assert said.startswith(f"{conf}:2: KubeProxyConfiguration: nodePortAddresses[0]: ") and repr(value) in said
    assert "a prefix length" in said or "expected an IP address" in said  # "primary/24": no address before the /


# --- names and values Kubernetes refuses: said at the input ----------------------------------------------------------


def _rename_service(data: dict) -> None:
    item(data, "Service", "openresty")["metadata"]["name"] = "Open_Resty"
    for obj in data["items"]:
        if (
            obj["kind"] == "EndpointSlice"
            and obj["metadata"]["labels"].get("kubernetes.io/service-name") == "openresty"
        ):
            obj["metadata"]["labels"]["kubernetes.io/service-name"] = "Open_Resty"


@pytest.mark.parametrize(
    ("edit", "where", "said"),
    [
        (
            _rename_service,
            ("name: Open_Resty", "kind: Service"),
            "Service default/Open_Resty: metadata.name: a Service name is at most 63 characters",
        ),
        (
            lambda d: item(d, "Service", "openresty")["spec"].update(externalTrafficPolicy="Bogus"),
            ("externalTrafficPolicy: Bogus", ""),
            "Service default/openresty: spec.externalTrafficPolicy: expected 'Cluster' or 'Local', not 'Bogus'",
        ),
        (
            lambda d: item(d, "Pod", "openresty")["spec"]["containers"][0]["ports"][0].update(name="Http"),
            ("name: Http", ""),
            "Pod default/openresty: spec.containers[0].ports[0].name: a container port's name is at most 15",
        ),
        (
            lambda d: item(d, "Node", "node1")["metadata"]["labels"].update(zone="-a"),
            ("labels:", "kind: Node"),
            "Node node1: metadata.labels: zone: a label value is at most 63 characters",
        ),
    ],
)
def test_what_validate_refuses_is_said_at_the_inputs_line(tmp_path, edit, where, said):
    dump = edited(tmp_path, edit)
    info = command_refusal([dump, KUBE_PROXY, VERSION], str(tmp_path / "s.yaml"))
    assert str(info.value).startswith(f"{dump}:{line_of(dump, where[0], after=where[1])}: {said}")
    assert "please report it" not in str(info.value) and "lab-import-" not in str(info.value)
    assert not (tmp_path / "s.yaml").exists()


def test_what_validate_refuses_where_the_import_moved_it_is_said_at_its_object(tmp_path):
    """An SCTP container port is left out, so the port named "Bad" is written first: the error names the pod
    (its line) and the field as written."""

    def edit(data: dict) -> None:
        ports = item(data, "Pod", "openresty")["spec"]["containers"][0]["ports"]
        ports[:] = [{"name": "sctp", "containerPort": 9, "protocol": "SCTP"}, {**ports[0], "name": "Bad"}]

    dump = edited(tmp_path, edit)
    info = command_refusal([dump, KUBE_PROXY, VERSION])
    item_line = line_of(dump, "kind: Pod") - 1  # "- apiVersion: v1", where the pod's item starts
    assert str(info.value).startswith(
        f"{dump}:{item_line}: Pod default/openresty: spec.containers[0].ports[0].name as lab import writes it: a "
        "container port's name is at most 15 characters"
    )


def test_what_validate_refuses_of_kube_proxys_configuration_is_said_at_its_line(tmp_path):
    conf = written(tmp_path, "kind: KubeProxyConfiguration\nmode: ipvs\nipvs:\n  scheduler: xyz\n", "conf.yaml")
    info = command_refusal([DUMP, conf, VERSION])
    assert str(info.value).startswith(f"{conf}:4: KubeProxyConfiguration: ipvs.scheduler: expected 'rr', 'wrr'")


# --- the CNI, and kube-proxy's configuration of each release ------------------------------------------------------


def test_flannel_in_its_own_namespace_is_recognised(tmp_path):
    def edit(data: dict) -> None:
        for obj in data["items"]:
            if obj["metadata"]["name"].startswith("kindnet"):
                obj["metadata"]["name"] = obj["metadata"]["name"].replace("kindnet", "kube-flannel-ds")
                obj["metadata"]["namespace"] = "kube-flannel"
                obj["metadata"]["labels"] = {"app": "flannel", "k8s-app": "flannel", "tier": "node"}

    result = imported([edited(tmp_path, edit), KUBE_PROXY, VERSION])
    assert notes_about(result, "Pod kube-flannel/kube-flannel-ds-", "the cluster runs flannel: built as cni: flannel")
    assert result.scenario["cluster"]["cni"] == "flannel"
    assert not notes_about(result, "no CNI recognised")


KUBEADM_1_25 = """apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
kind: KubeProxyConfiguration
metricsBindAddress: ""
mode: ""
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: "1.24"
udpIdleTimeout: 250ms
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
"""


def test_a_real_configuration_of_its_release_is_read_field_for_field(tmp_path):
    """kubeadm 1.25's ConfigMap, every field written: the userspace proxier's udpIdleTimeout is listed once as
    not modelled, showHiddenMetricsForVersion among the fields of the process."""
    conf = written(tmp_path, KUBEADM_1_25, "conf.yaml")
    result = imported([DUMP, conf], kube_version="1.25")
    assert notes_about(result, f"{conf}:1: KubeProxyConfiguration: set, not modelled", ": udpIdleTimeout")
    assert notes_about(result, "read, no effect on the rules", "showHiddenMetricsForVersion")
    assert not notes_about(result, "not a field")
    later = imported([DUMP, conf], kube_version="1.31")  # udpIdleTimeout went with the userspace proxier
    line = line_of(conf, "udpIdleTimeout")
    assert notes_about(later, f"{conf}:{line}: KubeProxyConfiguration: udpIdleTimeout: gone from kube-proxy in 1.26")
    assert not notes_about(later, "set, not modelled")
    assert imported([DUMP, KUBE_PROXY, VERSION]).scenario["cluster"]["proxyMode"] == "iptables"  # the 1.31 fixture


@pytest.mark.parametrize(
    ("text", "release", "said"),
    [
        ("showHiddenMetricsForAlpha: '1.30'", "1.31", "showHiddenMetricsForAlpha: not a field of a Kube"),
        ("showHiddenMetricsForAlpha: '1.30'", "1.31", "did you mean showHiddenMetricsForVersion?"),
        ("conntrack: {udpTimout: 30s}", "1.31", "conntrack.udpTimout: not a field of conntrack of a"),
        ("conntrack: {udpTimout: 30s}", "1.31", "did you mean udpTimeout?"),
        ("conntrack: {udpTimeout: 30s}", "1.28", "kube-proxy 1.28 has no conntrack.udpTimeout: it came in 1.29"),
        ("nftables: {masqueradeAll: true}", "1.28", "kube-proxy 1.28 has no nftables: it came in 1.29"),
        ("logging: {format: json}", "1.27", "kube-proxy 1.27 has no logging: it came in 1.28"),
        ("iptables: {localhostNodePorts: false}", "1.25", "has no iptables.localhostNodePorts: it came in 1.26"),
        ("detectLocal: {bridgeInterface: cbr0}", "1.23", "has no detectLocal: it came in 1.24"),
        ("windowsRunAsService: true", "1.30", "has no windowsRunAsService: it came in 1.31"),
        ("logging: {formatt: json}", "1.31", "logging.formatt: not a field of logging of a"),
        ("apiVersion: kubeproxy.config.k8s.io/v1alpha2", "1.37", "apiVersion: kube-proxy reads kubeproxy.config"),
    ],
)
def test_a_field_of_no_release_or_of_a_later_one_is_refused(tmp_path, text, release, said):
    conf = written(tmp_path, f"kind: KubeProxyConfiguration\n{text}\n", "conf.yaml")
    assert said in refusal([DUMP, conf], kube_version=release)


@pytest.mark.parametrize(
    ("version", "said"),
    [
        ("1." + "9" * 5000, "kube-proxy 1.9999999999... (5002 characters) is not reproduced; supported: 1.19"),
        ("1.\u0663\u0669", "kube-proxy 1.\u0663\u0669 is not reproduced"),  # not "newer than the lab knows"
        ("1.99", "kube-proxy 1.99 is newer than the lab knows"),
    ],
    ids=["5000-digits", "arabic-indic", "newer"],
)
def test_a_scenarios_release_is_read_in_ascii_digits(version, said):
    assert check_version(version).startswith(said)
