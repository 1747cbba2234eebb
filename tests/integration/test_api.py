"""The Python API on the real kernel: lab.up builds a variant, its actors run commands in their namespaces,
probes and steps act as in `lab run`, and everything is torn down on every way out of the block."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import yaml
from support.host import REPO, lab_namespaces
from support.scenario import write

import lab
from lab.api import LabError, to_json

STEPS = REPO / "tests" / "integration" / "topologies" / "steps.yaml"
NODEPORT = {"service": "web", "port": 80, "via": "nodePort", "node": "node2"}


def test_actors_probe_and_step_then_torn_down(host_unchanged, own_namespaces):
    with lab.up(STEPS, variant={"proxyMode": "iptables"}) as cluster:
        client = cluster["client"]
        assert client.address == "10.244.2.2" and cluster["default/client"] is client
        said = client.exec(["ip", "-4", "-o", "addr", "show", "dev", "eth0"])
        assert said.returncode == 0 and f"inet {client.address}/24" in said.stdout, said
        assert "KUBE-SERVICES" in cluster["node1"].exec(["iptables-save", "-t", "nat"]).stdout
        with pytest.raises(LabError, match=r"has no actor 'nodeX'; its actors are: .*node1, node2"):
            cluster["nodeX"]

        assert cluster.probe("cluster-ip-before").verdict.ok
        with pytest.raises(LabError, match=r"steps has no probe 'nope'; its probes are: nodeport-before, "):
            cluster.probe("nope")
        delivered = cluster.probe({"from": "client", "to": NODEPORT})
        record = to_json(delivered)
        assert record["ok"] and record["observed"]["backend"] == "web", record
        assert record["probe"] == "probe-1" and record["variant"] == {"proxyMode": "iptables"}
        json.dumps(record)  # as `lab run --json` prints it

        done = cluster.step({"delete": "Service/web"})
        assert [str(d.step) for d in done] == ["delete Service default/web (kube-proxy resyncs every node)"]
        refused = cluster.probe(from_="client", to=NODEPORT, expect={"outcome": "refused"})
        assert refused.verdict.ok, refused.verdict.reasons
        # The other Service still answers, after the step.
        other = cluster.probe({"from": "client", "to": {"service": "other", "port": 81}, "expect": {"backend": "web"}})
        assert other.verdict.ok, other.verdict.reasons
    assert own_namespaces() == []
    with pytest.raises(LabError, match="was taken down"):
        client.exec(["true"])


def test_a_refused_probe_or_step_is_said_in_words_and_the_lab_stays(own_namespaces):
    with lab.up(STEPS, variant={"proxyMode": "nftables"}) as cluster:
        with pytest.raises(LabError, match=r"^probe: to.service: no Service default/webx in the workload"):
            cluster.probe({"from": "client", "to": {"service": "webx", "port": 80}})
        with pytest.raises(LabError, match=r"^step: "):
            cluster.step({"scale": "Deployment/nothing", "replicas": 2})
        # Arguments of the wrong type, refused before the cluster is touched (tests/unit/test_api_arguments.py).
        with pytest.raises(LabError, match=r"^probe: expected a probe as a mapping .*, got 123 \(int\)$"):
            cluster.probe(123)
        with pytest.raises(LabError, match=r"^step: expected a step as a mapping .*, got 5 \(int\)$"):
            cluster.step(5)
        with pytest.raises(LabError, match=r"^probe 'cluster-ip-before': a probe of the file takes no fields"):
            cluster.probe("cluster-ip-before", expect={"outcome": "refused"})
        client = cluster["client"]
        with pytest.raises(LabError, match=r"^client\.exec input: expected None or text .*, got b'' \(bytes\)$"):
            client.exec(["cat"], input=b"")
        # One word longer than the kernel takes (MAX_ARG_STRLEN, 32 pages): execve's E2BIG, in words.
        with pytest.raises(LabError, match=r"^client\.exec: cannot run 'true': Argument list too long$"):
            client.exec(["true", "x" * 200_000])
        assert client.exec(["cat"], input="said").stdout == "said"
        assert cluster.probe({"from": "client", "to": NODEPORT}).verdict.ok
    assert own_namespaces() == []


def test_bad_input_is_one_message(tmp_path):
    with pytest.raises(LabError, match=r"no-such\.yaml"), lab.up(tmp_path / "no-such.yaml"):
        pass
    userspace = r"^variant proxyMode=userspace: .*expected .iptables., .ipvs. or .nftables."
    with pytest.raises(LabError, match=userspace), lab.up(STEPS, variant={"proxyMode": "userspace"}):
        pass
    with pytest.raises(LabError, match=r"noSuchAxis"), lab.up(STEPS, variant={"noSuchAxis": "x"}):
        pass
    seconds = r"^timeout: expected seconds, a number above 0 and at most 60, got nan \(float\)$"
    with pytest.raises(LabError, match=seconds), lab.up(STEPS, variant={"proxyMode": "iptables"}, timeout=math.nan):
        pass


def test_an_exception_in_the_block_tears_it_down(own_namespaces):
    with pytest.raises(RuntimeError, match="the user's own"), lab.up(STEPS, variant={"proxyMode": "iptables"}):
        assert own_namespaces()
        raise RuntimeError("the user's own")
    assert own_namespaces() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_in_the_block_tears_it_down(tmp_path, sig):
    script = tmp_path / "hold.py"
    script.write_text(
        textwrap.dedent(f"""
        import faulthandler, signal, sys, time
        import lab
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # where each thread is, should the teardown hang
        # Ctrl-C as a terminal delivers it, whatever this process inherited: a job a non-interactive shell starts
        # with & has SIGINT ignored, and Python then installs no KeyboardInterrupt handler (the block slept on).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with lab.up({str(STEPS)!r}, variant={{"proxyMode": "iptables"}}) as cluster:
            print(cluster.prefix, flush=True)
            time.sleep(600)
        """)
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        prefix = proc.stdout.readline().strip()
        assert prefix.startswith("lab-"), proc.stderr.read()
        assert any(ns.startswith(f"{prefix}-") for ns in lab_namespaces())
        time.sleep(0.2)
        proc.send_signal(sig)
        try:
            proc.wait(timeout=120)  # seconds at most; generous for a machine loaded by an emulated guest
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.kill()
            pytest.fail(f"the block's teardown did not end within 120 s; its threads:\n{proc.communicate()[1]}")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert [ns for ns in lab_namespaces() if ns.startswith(f"{prefix}-")] == []


def test_scale_to_zero_and_back_reproduces_kubernetes_139628(own_namespaces):
    # topologies/udp-scale-to-zero.yaml, driven step by step: 1.32's conntrack reconciler skips a Service with no
    # serving endpoint, so the statsd client's flow stays blackholed to the pod that left, until a pod comes back.
    variant = {"proxyMode": "iptables", "kubeVersion": "1.32"}
    flow = {"from": "client", "to": {"service": "statsd", "port": 8125}, "sourcePort": 40125}
    with lab.up(REPO / "topologies" / "udp-scale-to-zero.yaml", variant=variant) as cluster:
        assert cluster.probe(flow, expect={"outcome": "delivered", "backend": "statsd-0"}).verdict.ok
        (scaled,) = cluster.step({"scale": "Deployment/statsd", "replicas": 0})
        assert "statsd-0" not in {p.name for p in cluster.running.pods}
        blackholed = cluster.probe(flow, expect={"outcome": "dropped"})
        assert blackholed.verdict.ok, blackholed.verdict.reasons
        assert cluster.probe(from_="client", to=flow["to"], expect={"outcome": "refused"}).verdict.ok
        back = cluster.probe(
            flow, before=[{"scale": "Deployment/statsd", "replicas": 1}], expect={"backend": "statsd-1"}
        )
        assert back.verdict.ok, back.verdict.reasons
        assert to_json(back)["before"], to_json(back)
        # A replica the file's own steps never create: plugged in on the fly, at node2's next free address.
        cluster.step({"scale": "Deployment/statsd", "replicas": 2})
        assert cluster["statsd-2"].address == "10.244.2.4"
    assert own_namespaces() == []


USERS_TEST = """
def test_unknown_value(lab_up):
    lab_up({steps!r}, variant={{"proxyMode": "userspace"}})


def test_up_then_failing(lab_up):
    cluster = lab_up({steps!r}, variant={{"proxyMode": "iptables"}})
    print("PREFIX", cluster.prefix)
    assert cluster.probe(from_="client", to={{"service": "web", "port": 80}}).verdict.ok
    assert False, "the user's own failure"
"""


def test_the_fixture_in_a_users_session_fails_bad_input_in_words_and_tears_down(tmp_path):
    (tmp_path / "test_mine.py").write_text(USERS_TEST.format(steps=str(STEPS)))
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "--rootdir", str(tmp_path), "test_mine.py"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:]
    unknown = done.stdout.split("_ test_unknown_value _", 1)[1].split("_ test_up_then_failing _", 1)[0]
    assert "lab_up: variant proxyMode=userspace: 'userspace': expected 'iptables', 'ipvs' or 'nftables'" in unknown
    assert "Traceback" not in unknown and "lab/api" not in unknown and "During handling" not in unknown, unknown
    assert "the user's own failure" in done.stdout and "2 failed" in done.stdout, done.stdout[-3000:]
    prefix = done.stdout.split("PREFIX ", 1)[1].split()[0]
    assert [ns for ns in lab_namespaces() if ns.startswith(f"{prefix}-")] == []


def shape(value: object) -> object:
    """A JSON value's keys, all the way down (lists by their first item)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None


def test_a_probes_record_is_the_one_lab_run_json_prints(own_namespaces):
    argv = [sys.executable, "-m", "lab", "run", str(STEPS), "--variant", "proxyMode=iptables"]
    ran = subprocess.run([*argv, "--probe", "cluster-ip-before", "--json"], capture_output=True, text=True, timeout=120)
    (expected,) = [r for r in json.loads(ran.stdout)["results"] if r["probe"] == "cluster-ip-before"]
    written = {
        "name": "cluster-ip-before",
        "from": "client",
        "to": {"service": "web", "port": 80},
        "expect": {"outcome": "delivered", "backend": "web", "source": "client"},
    }
    with lab.up(STEPS, variant={"proxyMode": "iptables"}) as cluster:
        got = to_json(cluster.probe(written))
    assert shape(got) == shape(expected)
    for field in ("scenario", "file", "variant", "kernel", "probe", "from", "to", "expected", "ok", "reasons"):
        assert got[field] == expected[field], field
    for field in ("outcome", "backend", "node", "source", "source_ip"):
        assert got["observed"][field] == expected["observed"][field], field


def test_a_failed_step_is_named_and_the_cluster_refuses_what_follows(own_namespaces):
    with lab.up(STEPS, variant={"proxyMode": "iptables"}) as cluster:
        with pytest.raises(LabError, match=r"before: on node1: ip addr del 10.9.9.9/32 dev eth0.*exited with 2"):
            cluster.step({"run": "ip addr del 10.9.9.9/32 dev eth0", "nodes": ["node1"]})
        with pytest.raises(LabError, match=r"a step failed .*what it left is unknown"):
            cluster.probe(from_="client", to=NODEPORT)
    assert own_namespaces() == []


def scenario(name: str, nodes: int, workload: list[dict], probe: dict, cni: str = "bridge", **extra: object) -> str:
    """A scenario's text: kube-proxy 1.34, `nodes` nodes (node1 on 10.244.1.0/24, ...), the workload, one probe."""
    cluster = {"kubeVersion": "1.34", "clusterCIDR": "10.244.0.0/16", "serviceCIDR": "10.96.0.0/16", "cni": cni}
    return yaml.safe_dump(
        {
            "name": name,
            "cluster": cluster,
            "nodes": [
                {"name": f"node{i}", "ip": f"192.168.56.1{i}", "podCIDR": f"10.244.{i}.0/24"}
                for i in range(1, nodes + 1)
            ],
            "workload": workload,
            "probes": [{"expect": {"outcome": "delivered"}, **probe}],
            **extra,
        }
    )


def deployment(name: str) -> list[dict]:
    """A Deployment of one replica (on any node, replicas going to the nodes in turn), its pods listening on 8080,
    and a Service of port 80 in front of them."""
    labels = {"app": name}
    container = {"name": "c", "ports": [{"containerPort": 8080}]}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        },
        {
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    ]


CLIENT = {"kind": "Pod", "metadata": {"name": "client"}, "spec": {"nodeName": "node1"}}
WEB = {"service": "web", "port": 80}


@pytest.mark.parametrize(
    ("mode", "cni"), [("iptables", "bridge"), ("nftables", "bridge"), ("nftables", "routed-tunnel")]
)
def test_a_scale_up_beyond_the_build_plugs_new_pods_in_and_kube_proxy_sends_to_them(
    tmp_path, own_namespaces, mode, cni
):
    # A client pod on node1 and a Deployment of one replica, web, which the file's own probes never scale: its
    # replicas 2 and 3 are created on the fly, as the kubelet starts a pod, each at the next free address of its
    # node's podCIDR (replicas go to the nodes in turn: web-1 on node2, web-2 on node1 beside web-0), and
    # kube-proxy's next sync sends to them.
    one = {"name": "one-replica", "from": "client", "to": WEB, "expect": {"backend": "web-0"}}
    scaled = scenario("api-scale-up", 2, [CLIENT, *deployment("web")], one, cni, matrix={"proxyMode": [mode]})
    with lab.up(write(tmp_path, scaled)) as cluster:
        assert "web-1" not in cluster and cluster.probe("one-replica").verdict.ok
        (scaled,) = cluster.step({"scale": "Deployment/web", "replicas": 3})
        assert str(scaled.step) == "scale Deployment web to 3: create pod web-1, web-2 (kube-proxy resyncs every node)"
        web1, web2 = cluster["web-1"], cluster["default/web-2"]
        # routed-tunnel: the block's network address is the tunnel's, each pod holds a /32.
        first, prefixlen = (1, 32) if cni == "routed-tunnel" else (2, 24)
        assert (web1.address, web2.address) == (f"10.244.2.{first}", f"10.244.1.{first + 2}")
        assert f"inet {web1.address}/{prefixlen}" in web1.exec(["ip", "-4", "-o", "addr", "show", "dev", "eth0"]).stdout
        assert web1.namespace.startswith(f"{cluster.prefix}-")
        # web-0 and web-1 not ready: the Service's only endpoint is web-2, a pod the build did not make.
        cluster.step({"set": "Pod/web-0", "ready": False})
        cluster.step({"set": "Pod/web-1", "ready": False})
        reached = cluster.probe(from_="client", to=WEB, expect={"backend": "web-2", "source": "client"})
        assert reached.verdict.ok, reached.verdict.reasons
        # Across nodes: web-1, on node2, answers once ready again.
        cluster.step({"set": "Pod/web-1", "ready": True})
        cluster.step({"set": "Pod/web-2", "ready": False})
        across = cluster.probe(from_="client", to=WEB, expect={"backend": "web-1"})
        assert across.verdict.ok, across.verdict.reasons
        # Scaled back to one: the newest replicas go, their veths with them; web-0, not ready, leaves none.
        cluster.step({"scale": "Deployment/web", "replicas": 1})
        assert {p.name for p in cluster.running.pods} == {"client", "web-0"}
        assert web1.exec(["ip", "link", "show", "dev", "eth0"]).returncode != 0
        assert cluster.probe(from_="client", to=WEB, expect={"outcome": "refused"}).verdict.ok
        assert any(ns.endswith("-web-2") for ns in own_namespaces())
    assert own_namespaces() == []


# Two Deployments of one replica each, on the only node.
TWO_DEPLOYMENTS = scenario(
    "two-deployments",
    1,
    [*deployment("a"), *deployment("b")],
    {"name": "a-to-b", "from": "a-0", "to": {"service": "b", "port": 80}},
)


def test_a_scale_up_that_would_move_a_running_pods_address_is_refused_and_the_lab_stays(tmp_path, own_namespaces):
    # describe addresses new replicas in the workload's order: b scaled first, then a, would give a's new replica
    # the address b-1 runs at, and b-1 another. Refused before anything is done.
    with lab.up(write(tmp_path, TWO_DEPLOYMENTS)) as cluster:
        cluster.step({"scale": "Deployment/b", "replicas": 2})
        assert cluster["b-1"].address == "10.244.1.4"
        moved = r"describe now gives b-1 the address 10.244.1.5, and it runs at 10.244.1.4"
        with pytest.raises(LabError, match=moved):
            cluster.step({"scale": "Deployment/a", "replicas": 2})
        assert "a-1" not in cluster
        assert cluster.probe(from_="a-0", to={"service": "b", "port": 80}).verdict.ok
    assert own_namespaces() == []
