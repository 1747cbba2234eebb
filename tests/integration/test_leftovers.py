"""`lab down` removes what lab runs recorded and left behind, and nothing else.

Every scenario runs where /run is private (support.private_run): the machine's own /run/netns and /run/lab are
never seen, let alone changed, and whatever the scenario leaves there goes when it ends.
"""

from __future__ import annotations

import textwrap

from support.private_run import report_of

PRELUDE = """
import json, os, signal, subprocess, sys, time
from contextlib import ExitStack
from lab.realize import runs
from lab.realize.links import NetBuilder

def build(actors):
    prefix = runs.new_prefix()
    with ExitStack() as stack:  # closes the netlink sockets; the namespaces stay, pinned in /run/netns
        builder = NetBuilder(prefix, stack)
        for actor in actors:
            builder.open(actor)
    return prefix

def teardown(prefix, actors):
    runs.remove_namespaces([f"{prefix}-{a}" for a in actors])
    runs.release(prefix)

def killed_run(actors):
    # sys.argv[1] is this prelude: the child builds the way this process does.
    code = sys.argv[1] + f"\\nbuild({actors!r}); print('built', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "built\\n"
    child.kill()
    child.wait()

def down(*args):
    done = subprocess.run([sys.executable, "-m", "lab", "down", *args], capture_output=True, text=True)
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr, "entries": entries()}

def entries():
    return sorted(os.listdir("/run/netns"))

def report(**what):
    print(json.dumps(what))
"""


def in_private_run(script: str, timeout: float = 60) -> dict:
    """Run the PRELUDE and `script` where /run is private; what the script report()s comes back."""
    return report_of(PRELUDE + textwrap.dedent(script), PRELUDE, timeout=timeout)


def test_what_no_run_recorded_is_reported_and_left_and_never_breaks_a_later_run(host_unchanged):
    got = in_private_run("""
        os.mkdir("/run/netns/lab-0aa0aa-x")  # a directory: pyroute2's remove raised IsADirectoryError on it
        with open("/run/victim", "w") as f:
            f.write("keep me")
        os.symlink("/run/victim", "/run/netns/lab-0bb0bb-y")
        open("/run/netns/lab-0cc0cc-z", "w").close()
        first = down()
        prefix = build(["a"])
        teardown(prefix, ["a"])
        report(first=first, all=down("--all"), victim=open("/run/victim").read())
    """)
    left = ["lab-0aa0aa-x", "lab-0bb0bb-y", "lab-0cc0cc-z"]
    for done in (got["first"], got["all"]):
        assert done["rc"] == 0 and "Traceback" not in done["err"], done["err"]
        assert done["entries"] == left
        assert (
            f"left 3 entries in /run/netns no lab run recorded (ip netns delete NAME if yours): {' '.join(left)}"
            in (" ".join(done["out"].split()))
        )
    assert got["victim"] == "keep me"


def test_a_killed_runs_namespaces_go_a_live_runs_stay_unless_all(host_unchanged):
    got = in_private_run("""
        killed_run(["a", "b"])
        dead = entries()
        live = build(["c"])
        first = down()
        report(dead=dead, live=live, first=first, all=down("--all"), states=os.listdir("/run/lab"))
    """)
    live = f"{got['live']}-c"
    assert len(got["dead"]) == 2 and got["first"]["entries"] == [live]
    assert got["first"]["out"].startswith(f"removed 2 namespaces: {' '.join(got['dead'])}")
    assert f"left 1 namespaces of runs still running (lab down --all removes them too): {live}" in got["first"]["out"]
    assert got["all"]["entries"] == [] and got["all"]["out"] == f"removed 1 namespaces: {live}\n"
    assert got["states"] == [".lock"]


def test_a_pid_reused_by_another_process_does_not_keep_a_dead_runs_namespaces(host_unchanged):
    got = in_private_run("""
        killed_run(["a"])
        [name] = entries()
        prefix = name[:10]
        state = json.load(open(f"/run/lab/{prefix}.json"))
        other = subprocess.Popen(["sleep", "60"])  # an unrelated process now holds a pid...
        start = runs.process_start(other.pid)
        with open(f"/run/lab/{prefix}.json", "w") as f:  # ...which the dead run's state names, as if reused
            json.dump({**state, "pid": other.pid, "start": start + 1}, f)
        reused = down()
        killed_run(["b"])
        [name] = entries()
        state = json.load(open(f"/run/lab/{name[:10]}.json"))
        with open(f"/run/lab/{name[:10]}.json", "w") as f:  # the same process, same start: the run is alive
            json.dump({**state, "pid": other.pid, "start": start}, f)
        same = down()
        other.kill()
        report(reused=reused, same=same, name=name)
    """)
    assert got["reused"]["entries"] == [] and got["reused"]["out"].startswith("removed 1 namespaces")
    assert got["same"]["entries"] == [got["name"]]


def test_a_recorded_name_that_is_not_a_namespace_file_and_a_bad_state_are_left(host_unchanged):
    got = in_private_run("""
        with open("/run/victim", "w") as f:
            f.write("keep me")
        os.symlink("/run/victim", "/run/netns/lab-0aa0aa-x")
        with open("/run/lab/lab-0aa0aa.json", "w") as f:  # a dead run that recorded it
            json.dump({"pid": 999999999, "start": 1, "namespaces": ["lab-0aa0aa-x"]}, f)
        open("/run/netns/lab-0bb0bb-y", "w").close()
        with open("/run/lab/lab-0bb0bb.json", "w") as f:
            f.write('{"pid": 1')  # no run writes this: lab renames whole files into place
        report(done=down(), victim=open("/run/victim").read(), states=sorted(os.listdir("/run/lab")))
    """)
    out = " ".join(got["done"]["out"].split())
    assert got["done"]["entries"] == ["lab-0aa0aa-x", "lab-0bb0bb-y"] and got["victim"] == "keep me"
    assert "left 1 entries in /run/netns a run recorded that are not a plain file, so no namespace: lab-0aa0aa-x" in out
    assert "left 1 files in /run/lab that are no run's state (what they name is left too): lab-0bb0bb.json" in out
    assert "no lab run recorded (ip netns delete NAME if yours): lab-0bb0bb-y" in out
    assert got["states"] == [".lock", "lab-0bb0bb.json"]


def test_release_removes_a_recorded_namespace_the_builder_never_got(host_unchanged):
    """SIGTERM during create_netns: the namespace is pinned, but the builder (and so the teardown) never hears
    of it. The run recorded it first, so release() removes it before forgetting the run."""
    got = in_private_run("""
        from lab.realize.enter import create_netns
        prefix = build(["a"])
        runs.record(prefix, f"{prefix}-b")
        create_netns(f"{prefix}-b")
        runs.remove_namespaces([f"{prefix}-a"])  # the teardown: only what the builder knew
        runs.release(prefix)
        report(entries=entries(), states=os.listdir("/run/lab"))
    """)
    assert got == {"entries": [], "states": [".lock"]}


def test_live_runs_keep_their_namespaces_through_many_concurrent_downs(host_unchanged):
    """The race that removed a live run's namespaces in 165 of 13 191 runs: runs starting while others clean up."""
    got = in_private_run(
        """
        import multiprocessing, random

        # Each loop goes on for `seconds` and until it has done `least` (a busy machine does fewer per second),
        # at most LIMIT seconds.
        LIMIT = 40

        def going(started, seconds, done, least):
            spent = time.monotonic() - started
            return spent < LIMIT and (spent < seconds or done < least)

        def run_loop(seconds, results):
            cycles, lost = 0, []
            started = time.monotonic()
            while going(started, seconds, cycles, 8):
                actors = ["a", "b", "c"]
                cycles += 1
                try:
                    prefix = build(actors)  # fails when a cleanup removes a namespace file before it is pinned
                except Exception as exc:
                    lost.append(repr(exc))
                    continue
                time.sleep(random.uniform(0, 0.005))
                lost += [f"{prefix}-{a}" for a in actors if not os.path.exists(f"/run/netns/{prefix}-{a}")]
                teardown(prefix, actors)
            results.put(("runs", cycles, lost))

        def down_loop(seconds, results):
            calls = 0
            started = time.monotonic()
            while going(started, seconds, calls, 10):
                runs.remove_leftovers()
                calls += 1
            results.put(("downs", calls, []))

        def read_loop(seconds, results):
            torn = []
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for name in os.listdir("/run/lab"):
                    try:
                        text = open(f"/run/lab/{name}").read()
                    except FileNotFoundError:
                        continue  # released meanwhile
                    if name.endswith(".json") and runs.RunState.from_json(name[:10], text) is None:
                        torn.append(text)
            results.put(("reads", 0, torn))

        results = multiprocessing.Queue()
        workers = [multiprocessing.Process(target=run_loop, args=(3, results)) for _ in range(4)]
        workers += [multiprocessing.Process(target=down_loop, args=(3, results)) for _ in range(3)]
        workers.append(multiprocessing.Process(target=read_loop, args=(3, results)))
        for w in workers:
            w.start()
        clis = [down() for _ in range(3)]  # the command itself too, meanwhile
        counts = {"runs": [], "downs": [], "reads": []}
        for _ in workers:
            role, count, found = results.get(timeout=LIMIT + 30)
            counts[role].append((count, found))
        for w in workers:
            w.join()
        report(**counts, clis=clis, after=down())
        """,
        timeout=150,
    )
    cycles, lost = sum(c for c, _ in got["runs"]), [n for _, names in got["runs"] for n in names]
    assert not lost, f"{len(lost)} namespaces of live runs removed in {cycles} runs: {lost[:5]}"
    torn = [text for _, texts in got["reads"] for text in texts]
    assert not torn, f"a state file was read half-written: {torn[:3]}"
    assert cycles >= 30 and sum(c for c, _ in got["downs"]) >= 30
    assert all(c["rc"] == 0 for c in got["clis"]), got["clis"]
    assert got["after"]["entries"] == []
