"""A live lab on the kernel: `lab up` returns and the lab stays (its keeper outlives the command), `lab exec` runs
curl in an actor's namespace against the lab's backends, `lab probe` gives the verdict `lab run` gives, and
`lab down` of one lab leaves another's namespaces alone; the host's namespace is untouched throughout."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.host import REPO
from support.private_run import report_of

SCENARIO = REPO / "topologies" / "nodeport-source-ip.yaml"
VARIANT = ["--variant", "proxyMode=iptables", "--variant", "externalTrafficPolicy=Cluster"]


def lab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


def namespaces(prefix: str) -> list[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listing.splitlines() if line.startswith(f"{prefix}-")]


def up(path: Path = SCENARIO, *variant: str) -> str:
    done = lab("up", str(path), *variant)
    assert done.returncode == 0, done.stderr
    return done.stdout.split(":", 1)[0]  # "lab-xxxxxx: scenario (...)"


@pytest.fixture
def live(host_unchanged):
    """A live lab of nodeport-source-ip, taken down after the test whatever happened."""
    prefix = up(SCENARIO, *VARIANT)
    try:
        yield prefix
    finally:
        lab("down", prefix)
        assert namespaces(prefix) == []


def test_a_live_lab_outlives_lab_up_and_serves_curl(live):
    assert len(namespaces(live)) == 6  # fabric, 3 nodes, the client, the backend
    listed = lab("ls").stdout
    assert live in listed and "nodeport-source-ip" in listed
    answer = lab("exec", "--run", live, "client", "--", "curl", "-s", "http://192.168.56.12:30080/")
    assert answer.returncode == 0, answer.stderr
    reply = json.loads(answer.stdout)
    # Through node2, which has no endpoint: the backend on node1 saw node2's address (eTP Cluster SNATs).
    assert reply["backend"] == "openresty" and reply["peer"].startswith("192.168.56.12:")


def test_lab_exec_gives_the_status_a_shell_gives(live, tmp_path):
    status = lab("exec", "--run", live, "node1", "--", "sh", "-c", "exit 3")
    assert status.returncode == 3
    missing = lab("exec", "--run", live, "node1", "--", "nosuchcmd")
    assert missing.returncode == 127 and missing.stderr == "lab exec: nosuchcmd: command not found\n"
    (tmp_path / "notes").write_text("echo hi\n")  # mode 0644: no execute bit, root's neither
    not_executable = lab("exec", "--run", live, "node1", "--", str(tmp_path / "notes"))
    assert not_executable.returncode == 126
    assert not_executable.stderr == f"lab exec: {tmp_path / 'notes'}: not executable\n"


def test_lab_probe_gives_lab_runs_verdict(live):
    probed = lab("probe", "--run", live, "via-node-without-pod", "--json")
    assert probed.returncode == 0, probed.stderr
    ran = lab("run", str(SCENARIO), *VARIANT, "--probe", "via-node-without-pod", "--json")
    assert ran.returncode == 0, ran.stderr
    (record,) = [r for r in json.loads(ran.stdout)["results"] if r["probe"] == "via-node-without-pod"]
    live_record = json.loads(probed.stdout)
    for key in ("outcome", "backend", "node", "source", "source_ip"):
        assert live_record["observed"][key] == record["observed"][key], key
    assert live_record["ok"] and record["ok"]


def test_an_ad_hoc_probe_and_its_refusals(live):
    probed = lab(
        "probe", "--run", live, "--from", "client", "--to", "openresty:80", "--via", "nodePort", "--node", "node3"
    )
    assert probed.returncode == 0, probed.stderr
    assert "delivered by openresty from node3" in probed.stdout
    # A Service and a pod as NAMESPACE/NAME, as a scenario names them; an ad hoc probe that fails exits 1.
    namespaced = lab("probe", "--run", live, "--from", "default/openresty", "--to", "default/openresty:http")
    assert namespaced.returncode == 0 and "delivered by openresty" in namespaced.stdout, namespaced.stderr
    failed = lab("probe", "--run", live, "--from", "client", "--to", "node1:9")
    assert failed.returncode == 1 and "expected delivered, got refused" in failed.stdout, failed.stdout
    entered = lab("exec", "--run", live, "default/openresty", "--", "true")
    assert entered.returncode == 0, entered.stderr
    unknown = lab("probe", "--run", live, "--from", "client", "--to", "nope:80")
    assert unknown.returncode == 2 and "nope is no Service, node, pod or host of the lab" in unknown.stderr
    stranger = lab("exec", "--run", live, "stranger", "--", "true")
    assert stranger.returncode == 2 and "has no actor 'stranger'" in stranger.stderr


def test_lab_down_of_one_lab_leaves_anothers(live):
    other = up(REPO / "topologies" / "invalid-reset.yaml", "--variant", "proxyMode=iptables")
    try:
        assert namespaces(other)
        done = lab("down", other)
        assert done.returncode == 0, done.stderr
        assert f"{other}: invalid-reset" in done.stdout
        # Only what concerns `other`: not the live lab, nor anyone else's runs on the machine.
        assert done.stdout.splitlines() == [
            f"{other}: invalid-reset (proxyMode=iptables, tcpBeLiberal=false) taken down"
        ]
        assert namespaces(other) == []
        assert len(namespaces(live)) == 6  # untouched
    finally:
        lab("down", other)


# Run where /run is private (support.private_run): the labs there meet no other run on the machine, whose `lab run`
# would sweep a killed keeper's namespaces, or whose live labs a bare `lab down` would count; what fails halfway
# is taken down by `lab down --all`, which there reaches this script's labs alone.
LIVE_PRELUDE = f"""
import json, os, pty, select, signal, subprocess, sys, time
from pathlib import Path

def lab(*args):
    done = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, timeout=120)
    return {{"rc": done.returncode, "out": done.stdout, "err": done.stderr}}

def up(path):
    done = lab("up", path, "--variant", "proxyMode=iptables")
    assert done["rc"] == 0, done["err"]
    return done["out"].split(":", 1)[0]

def namespaces(prefix):
    return sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix + "-"))

SCENARIO = {str(REPO / "topologies" / "invalid-reset.yaml")!r}
"""


def in_private_run(script: str) -> dict:
    code = (
        LIVE_PRELUDE
        + "try:\n"
        + textwrap.indent(textwrap.dedent(script), "    ")
        + "\nfinally:\n    lab('down', '--all')\n"
    )
    return report_of(code, timeout=300)


def test_a_killed_keepers_lab_is_removed_by_lab_down(host_unchanged):
    """SIGKILL leaves the namespaces: the run is dead, so it is no live lab any more, and lab down sweeps it."""
    got = in_private_run("""
        prefix = up(SCENARIO)
        state = json.loads(Path(f"/run/lab/{prefix}.json").read_text())
        os.kill(state["pid"], signal.SIGKILL)
        while Path(f"/proc/{state['pid']}").exists():
            time.sleep(0.05)
        left, listed = namespaces(prefix), lab("ls")["out"]
        done = lab("down", prefix)
        print(json.dumps(dict(prefix=prefix, state=state, left=left, listed=listed, done=done,
                              after=namespaces(prefix), files=os.listdir("/run/lab"))))
    """)
    prefix, recorded = got["prefix"], got["state"]["namespaces"]
    assert prefix not in got["listed"] and got["left"] == sorted(recorded)
    assert got["done"]["out"] == f"removed {len(recorded)} namespaces: {' '.join(recorded)}\n", got["done"]
    assert got["after"] == [] and got["files"] == [".lock"]


def test_bare_lab_down_with_several_labs_refuses_and_an_open_shell_is_told(host_unchanged):
    got = in_private_run("""
        first, second = up(SCENARIO), up(SCENARIO)
        refused = lab("down")
        terminal, tty = pty.openpty()
        shell = subprocess.Popen([sys.executable, "-m", "lab", "shell", "--run", first, "client"],
                                 stdin=tty, stdout=tty, stderr=tty, start_new_session=True)
        os.close(tty)
        seen, deadline = b"", time.monotonic() + 30
        def read_until(done):
            global seen
            while not done() and time.monotonic() < deadline:
                if select.select([terminal], [], [], 0.2)[0]:
                    try:
                        seen += os.read(terminal, 4096)
                    except OSError:  # the shell is gone and its terminal with it
                        return
        read_until(lambda: f"[{first} client]".encode() in seen)
        prompted = seen.decode(errors="replace")
        down = lab("down", first)
        read_until(lambda: shell.poll() is not None and b"ends now" in seen)
        print(json.dumps(dict(first=first, second=second, refused=refused, prompted=prompted, down=down,
                              shell=seen.decode(errors="replace"), second_left=namespaces(second))))
    """)
    first, second = got["first"], got["second"]
    assert got["refused"]["rc"] == 2 and got["second_left"], got["refused"]
    assert f"2 live labs: give RUN, one of {first} invalid-reset (" in got["refused"]["err"], got["refused"]["err"]
    assert f"; {second} invalid-reset (" in got["refused"]["err"] and "--all" in got["refused"]["err"]
    assert f"[{first} client]" in got["prompted"], got["prompted"]
    assert got["down"]["rc"] == 0 and second not in got["down"]["out"], got["down"]
    assert f"lab down: {first} is being taken down; this lab shell ends now" in got["shell"], got["shell"]
