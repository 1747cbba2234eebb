"""Fuzz: mutants of every catalogue file, of replay dumps, of kubectl output for `lab import` and of a node's dumps
for `lab diff` through the real command line, in process; of the Python API's arguments (lab.up, probe, step,
exec); and of requests sent to a live lab's keeper over its socket.

Every input is untrusted, so whatever a mutant holds, `lab validate` and `lab replay` must answer with a
result or a clear error (exit 0, 1 or 2, an `error: …` message), never a Python traceback and never a hang.

The mutator is our own and seeded: the same seed makes the same mutants on every machine, so a failure
names a seed and a mutant number that reproduce it. Each mutant applies one to three edits of the kinds
that reach different layers: bytes the decoder must refuse, YAML structure (tags, anchors, aliases,
brackets, indentation, duplicate keys), scalars a schema must refuse (ports, CIDRs, numbers, names),
misspelt keys, and lines deleted, repeated or swapped. A mutant that hangs is cut by an interval timer
after HANG_SECONDS and counts as a failure.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.timelimit import Hung, time_limit

from lab.cli import main

REPO = Path(__file__).resolve().parents[2]
CATALOGUE = sorted((REPO / "topologies").glob("*.yaml"))
SEED = 20261123
SCENARIO_MUTANTS = 250
DUMP_MUTANTS = 150
HANG_SECONDS = 20.0

# Values a schema has to refuse or survive: out-of-range numbers, broken addresses, YAML's odd scalars.
SCALARS = [
    "-1", "0", "65536", "99999999999999999999999", "1e309", "0x1F", "nan", ".inf", "~", "null", "true", "''",
    "[]", "{}", "abc", "10.0.0.0/33", "300.1.1.1", "::1", "fe80::1/64", "1.2.3", "10.244.1.0/30", "Local",
    "Clusterr", "nftables", "ipvs", "1.3", "'1.99'", "'0.1'", "node9", "x" * 300, "\"\\x00\"", "!!int 'abc'",
    "!!binary AAAA", "*undefined", "&a x",
]  # fmt: skip
# Structure that reaches the YAML layer itself.
FRAGMENTS = [
    "!foo ", "!!python/object:os.system ", "&a ", "*a", "<<: {x: 1}\n", "[", "]", "{", "}", "- ", ": ",
    "\t", "\n  extra: 1\n", "%YAML 1.1\n---\n", "? ", "|\n", "---\n", "...\n", "#", "'", '"',
]  # fmt: skip
BYTES = [b"\xff", b"\x00", b"\xc3\x28", b"\xef\xbb\xbf", b"\r", b"\x1b[31m"]
# Lines of an iptables-save or nft dump that change what the kernel is asked to do.
DUMP_LINES = [
    "COMMIT", "*nat", "*filter", "*raw", ":KUBE-SERVICES - [0:0]", "-A PREROUTING -j KUBE-SERVICES",
    "-A KUBE-SERVICES -j DROP", "-A KUBE-SERVICES -j ACCEPT", "-A INPUT -j REJECT",
    "-A KUBE-SEP-A -p tcp -j DNAT --to-destination ::1", "-A KUBE-SEP-A -p tcp -j DNAT --to-destination 0.0.0.0:0",
    "-A KUBE-SVC-X -m recent --name KUBE-SEP-A --rcheck --seconds 10800 --reap -j KUBE-SEP-A",
    "-A KUBE-SVC-X -m statistic --mode random --probability 0.0 -j KUBE-SEP-B",
    "-A OUTPUT -m nfacct --nfacct-name nope -j DROP", "-A KUBE-SERVICES -j KUBE-NOWHERE",
    "add table ip kube-proxy", "flush ruleset", "add chain ip kube-proxy x { type nat hook prerouting priority 0 ; }",
    "add rule ip kube-proxy x drop", "add rule ip kube-proxy x dnat to 10.180.0.9:80",
    "table ip kube-proxy {", "}", "",
    # What no dump holds and lab replay refuses (lab.replay.review): each must be refused with its line, never run.
    'include "/etc/hostname"', "define x = 10.0.0.1", "add rule ip kube-proxy x ip daddr $x drop", "monitor",
    '-A KUBE-SERVICES -m comment --comment "-j LED COMMIT" -j RETURN', "-A KUBE-SERVICES -j LED --led-trigger-id x",
    "-A KUBE-SERVICES -m bpf --object-pinned /sys/fs/bpf/x -j DROP", '-A KUBE-SERVICES -m comment --comment "open',
    "save -file /tmp/lab-fuzz", "add KUBE-CLUSTER-IP 10.96.0.10,tcp:80 -fi /etc/hostname", "destroy",
    "add KUBE-CLUSTER-IP 10.96.0.11,tcp:80", "create KUBE-X hash:ip family inet",
    # ... in the spellings the tools read (an abbreviation, a joined value), and iptables-save -c's counters
    "-A KUBE-SERVICES --jum LED", "-A KUBE-SERVICES -jIDLETIMER", "-A KUBE-SERVICES --modprobe /tmp/lab-fuzz",
    'add rule ip kube-proxy x meta mark set 0xaosf name "x"', "[0:0] -A KUBE-SERVICES -j ACCEPT",
]  # fmt: skip


def _words(text: str) -> list[re.Match[str]]:
    """Scalars and keys: runs of characters that are no YAML punctuation."""
    return list(re.finditer(r"[^\s:{}\[\],#'\"-][^\s:{}\[\],#'\"]*", text))


def _replace_scalar(rng: random.Random, text: str, pool: list[str]) -> str:
    words = _words(text)
    if not words:
        return text
    word = rng.choice(words)
    return text[: word.start()] + rng.choice(pool) + text[word.end() :]


def _misspell(rng: random.Random, text: str) -> str:
    keys = list(re.finditer(r"([A-Za-z][A-Za-z0-9]+)(?=:)", text))
    if not keys:
        return text
    key = rng.choice(keys)
    name = key.group(1)
    cut = rng.randrange(len(name))
    typo = rng.choice([name[:cut] + name[cut + 1 :], name[:cut] + name[cut].swapcase() + name[cut + 1 :]])
    return text[: key.start()] + typo + text[key.end() :]


def _insert(rng: random.Random, text: str, fragment: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + fragment + text[at:]


def _lines(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    kind = rng.randrange(4)
    if kind == 0:
        del lines[i]
    elif kind == 1:
        lines.insert(j, lines[i])  # a repeated line is a duplicate key or list item
    elif kind == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines[i] = " " * rng.choice([1, 2, 4]) + lines[i] if rng.random() < 0.5 else lines[i].lstrip()
    return "\n".join(lines)


TextEdit = Callable[[random.Random, str], str]
SCENARIO_EDITS: list[TextEdit] = [
    lambda rng, t: _replace_scalar(rng, t, SCALARS),
    _misspell,
    lambda rng, t: _insert(rng, t, rng.choice(FRAGMENTS)),
    _lines,
    lambda rng, t: t[: rng.randrange(len(t) + 1)],
]
DUMP_EDITS: list[TextEdit] = [
    lambda rng, t: _replace_scalar(rng, t, [*SCALARS, "DROP", "ACCEPT", "KUBE-MARK-DROP", "0x4000/0x4000"]),
    lambda rng, t: _insert(rng, t, "\n" + rng.choice(DUMP_LINES) + "\n"),
    _lines,
    lambda rng, t: t[: rng.randrange(len(t) + 1)],
]


def mutants(original: str, edits: list[TextEdit], seed: int, count: int) -> Iterator[tuple[int, bytes]]:
    """`count` mutants of `original`, each from its own seeded generator so any one can be made alone."""
    for number in range(count):
        rng = random.Random(f"{seed}/{number}")
        text = original
        for _ in range(rng.randint(1, 3)):
            text = rng.choice(edits)(rng, text)
        data = text.encode()
        if rng.random() < 0.1:  # bytes no text edit can make: invalid UTF-8, NUL, a BOM, control codes
            at = rng.randrange(len(data) + 1)
            data = data[:at] + rng.choice(BYTES) + data[at:]
        yield number, data


def run_cli(argv: list[str]) -> tuple[int, str]:
    """`lab ARGV` in this process: its exit status and what it printed to stderr. Raises what escapes main()."""
    term = signal.getsignal(signal.SIGTERM)  # lab replay installs its own handler: give pytest its own back
    stderr = io.StringIO()
    try:
        with time_limit(HANG_SECONDS), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            main(argv)
    except SystemExit as done:
        return (done.code if isinstance(done.code, int) else 0), stderr.getvalue()
    finally:
        signal.signal(signal.SIGTERM, term)
    return 0, stderr.getvalue()


def check_mutant(tmp_path: Path, name: str, data: bytes, argv: Callable[[Path], list[str]]) -> tuple[int, str]:
    """lab's exit status for this mutant, and "" when it answered properly, else what went wrong (the mutant is
    kept for a rerun)."""
    path = tmp_path / name
    path.write_bytes(data)
    try:
        status, said = run_cli(argv(path))
    except Hung:
        return -1, f"{name}: no answer within {HANG_SECONDS:g} s (kept at {path})"
    except Exception as exc:  # noqa: BLE001 - any exception escaping main() is the traceback a user would see
        return -1, f"{name}: {type(exc).__name__}: {exc} (kept at {path})"
    if status not in (0, 1, 2) or "Traceback" in said or (status == 2 and "error" not in said):
        return status, f"{name}: exit {status}: {said.strip()[:300]} (kept at {path})"
    path.unlink()
    return status, ""


def fuzz(
    tmp_path: Path,
    original: str,
    edits: list[TextEdit],
    count: int,
    argv: Callable[[int, Path], list[str]],
    refused: int = 4,
) -> None:
    """Every mutant answered; and the mutants really reach lab: at least one in `refused` refused, some still
    valid."""
    statuses, failures = [], []
    for number, data in mutants(original, edits, SEED, count):
        status, problem = check_mutant(tmp_path, f"mutant-{number}", data, lambda p, n=number: argv(n, p))
        statuses.append(status)
        if problem:
            failures.append(problem)
    assert not failures, f"{len(failures)} of {count} mutants (seed {SEED}):\n" + "\n".join(failures[:20])
    assert statuses.count(2) >= count // refused, f"too few mutants refused: {statuses.count(2)} of {count}"
    assert statuses.count(0) + statuses.count(1) >= count // 20, "too few mutants still ran: the edits are too blunt"


@pytest.mark.parametrize("scenario", CATALOGUE, ids=lambda p: p.stem)
def test_validate_answers_every_mutant_of_a_catalogue_file(scenario, tmp_path):
    fuzz(tmp_path, scenario.read_text(), SCENARIO_EDITS, SCENARIO_MUTANTS, lambda _, p: ["validate", str(p)])


DUMPS = {
    "rules": (REPO / "tests/fixtures/replay/two-endpoints.rules", ["--rules"]),
    "nft": (REPO / "tests/fixtures/replay/two-endpoints.nft", ["--nft"]),
    # kube-proxy's own golden: only its chains, replayed as a node holds it
    "golden": (REPO / "tests/golden/iptables/overall_iptables_rules.txt", ["--add-kube-jumps", "--rules"]),
    # the sets beside a node's rules (ipset restore runs them as root, in the node's namespace)
    "ipsets": (
        REPO / "tests/fixtures/replay/kube-proxy.ipsets",
        ["--rules", str(REPO / "tests/fixtures/replay/two-endpoints.rules"), "--ipsets"],
    ),
}
REPLAY_PROBE = ["--node-ip", "192.168.0.2", "--pod-cidr", "10.0.0.0/8", "--timeout", "0.2"]
REPLAY_FLOWS = [
    ["--from", "10.0.1.9", "--to", "172.30.0.41:80"],
    ["--from", "203.0.113.9", "--to", "172.30.0.49:80"],
    ["--from", "192.168.0.2", "--to", "172.30.0.42:80"],
]


@pytest.mark.parametrize("kind", DUMPS)
def test_replay_answers_every_mutant_of_a_dump(kind, tmp_path):
    dump, option = DUMPS[kind]

    def argv(number: int, path: Path) -> list[str]:
        return ["replay", *option, str(path), *REPLAY_PROBE, *REPLAY_FLOWS[number % len(REPLAY_FLOWS)]]

    fuzz(tmp_path, dump.read_text(), DUMP_EDITS, DUMP_MUTANTS, argv)


KUBECTL = REPO / "tests/fixtures/kubectl"
IMPORT_MUTANTS = 200


@pytest.mark.parametrize(
    "mutated",
    ["nodeport-source-ip/dump.yaml", "nodeport-source-ip/kube-proxy.yaml", "shop/dump.yaml", "metallb-l2/metallb.yaml"],
)
def test_import_answers_every_mutant_of_kubectl_output(mutated, tmp_path):
    """`lab import` of a mutated dump, ConfigMap or MetalLB's objects beside the other inputs, every other one with
    --anonymize: a scenario or a clear error."""
    cluster, name = mutated.split("/")
    inputs = ("dump.yaml", "kube-proxy.yaml", "version.yaml", "metallb.yaml")
    others = [str(KUBECTL / cluster / f) for f in inputs if f != name and (KUBECTL / cluster / f).exists()]

    def argv(number: int, path: Path) -> list[str]:
        return ["import", str(path), *others, *(["--anonymize"] if number % 2 else [])]

    fuzz(tmp_path, (KUBECTL / mutated).read_text(), SCENARIO_EDITS, IMPORT_MUTANTS, argv)


def test_import_answers_every_mutant_of_a_file_of_several_documents(tmp_path):
    """kubectl's outputs concatenated with ---: the structure between documents mutated too."""
    docs = "".join(f"---\n{(KUBECTL / 'dual-stack' / f).read_text()}" for f in ("dump.yaml", "kube-proxy.yaml"))
    edits = [*SCENARIO_EDITS, lambda rng, t: _insert(rng, t, rng.choice(["\n---\n", "\n...\n", "---\n---\n"]))]
    version = str(KUBECTL / "dual-stack" / "version.yaml")
    fuzz(tmp_path, docs, edits, IMPORT_MUTANTS, lambda _, p: ["import", str(p), version])


# --- lab diff: a node's dumps against a scenario -----------------------------------------------------------------

DIFF_SCENARIO = REPO / "tests/fixtures/diff/many-features.yaml"
DIFF_MUTANTS = 120


def _node_dumps(mode: str) -> dict[str, str]:
    """What kube-proxy 1.31 of `mode` writes on node1 of the diff fixture: the dumps a node would give."""
    from lab.describe.load import load_scenario
    from lab.render.dataplane import node_dataplane

    (topo,) = load_scenario(DIFF_SCENARIO, {"proxyMode": [mode], "kubeVersion": ["1.31"]}).variants
    plane = node_dataplane(topo, "node1")
    if mode == "nftables":
        return {"--nft": plane.nft}
    if mode == "ipvs":
        return {"--rules": plane.iptables, "--ipsets": plane.ipsets, "--ipvs": plane.ipvs}
    return {"--rules": plane.iptables}


@pytest.mark.parametrize(
    ("mode", "option"),
    [("iptables", "--rules"), ("nftables", "--nft"), ("ipvs", "--ipsets"), ("ipvs", "--ipvs")],
)
def test_diff_answers_every_mutant_of_a_node_dump(mode, option, tmp_path):
    """`lab diff` with one of the node's dumps mutated (the others as kube-proxy wrote them): identical, the
    differences, or a clear error."""
    dumps = _node_dumps(mode)
    given = []
    for other, text in dumps.items():
        if other != option:
            (tmp_path / other.strip("-")).write_text(text)
            given += [other, str(tmp_path / other.strip("-"))]

    def argv(number: int, path: Path) -> list[str]:
        flags = ["--variant", f"proxyMode={mode}", "--variant", "kubeVersion=1.31", *(["--json"] if number % 2 else [])]
        return ["diff", str(DIFF_SCENARIO), "--node", "node1", *flags, *given, option, str(path)]

    fuzz(tmp_path, dumps[option], DUMP_EDITS, DIFF_MUTANTS, argv, refused=10)


# --- the Python API --------------------------------------------------------------------------------------------

API_MUTANTS = 60
# Arguments of every type and range a caller might pass by mistake.
API_VALUES: list[object] = [
    123, -1, 0, 1e12, float("nan"), float("inf"), True, None, "", "x", "x" * 300, "web\x00", "../../etc/passwd",
    b"", b"web", [], [1], {}, {"x": 1}, ("web",), object(), {"proxyMode": 5}, {"proxyMode": "bogus"},
    {"kubeVersion": ["1.31"]}, "Deployment/web", "Pod/web", {"from": "web"}, 80, 65536, "web:80",
]  # fmt: skip


def _mutated(rng: random.Random, value: object) -> object:
    """`value` with one part replaced: the whole, a field's value, a field's name, or an item of a list."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        copy = dict(value)
        if rng.random() < 0.25:
            copy[rng.choice(["", "fromm", "expect", "steps", "before", 1])] = copy.pop(key)
        else:
            copy[key] = _mutated(rng, copy[key])
        return copy
    if isinstance(value, list) and value and rng.random() < 0.7:
        copy = list(value)
        at = rng.randrange(len(copy))
        copy[at] = _mutated(rng, copy[at])
        return copy
    return rng.choice(API_VALUES)


API_CALLS: dict[str, tuple[tuple[object, ...], Callable[..., object]]] = {
    # name: (valid arguments, the call made with them)
    "up": (("hairpin", {"proxyMode": "iptables"}, 0.5), lambda cluster, *a: _up_and_leave(*a)),
    "probe": (({"from": "far", "to": {"service": "web", "port": 80}},), lambda cluster, *a: cluster.probe(*a)),
    "step": (({"run": "true", "nodes": ["node1"]},), lambda cluster, *a: cluster.step(*a)),
    "exec": ((["true"], 5, None), lambda cluster, *a: cluster["far"].exec(*a)),
    "actor": (("far",), lambda cluster, *a: cluster[a[0]]),
}


def _up_and_leave(*args: object) -> None:
    import lab

    with lab.up(*args):  # type: ignore[arg-type]
        pass


def api_mutants(name: str, count: int) -> Iterator[tuple[int, tuple[object, ...]]]:
    """`count` argument tuples for API_CALLS[name], each with one argument mutated, from its own seeded
    generator."""
    valid = API_CALLS[name][0]
    for number in range(count):
        rng = random.Random(f"{SEED}/api/{name}/{number}")
        args = list(valid)
        at = rng.randrange(len(args))
        args[at] = _mutated(rng, args[at])
        yield number, tuple(args)


@pytest.fixture
def api_cluster():
    """A lab of its own per call: a mutated step that fails (a command that exits 1) leaves it refusing the rest."""
    import lab

    with lab.up("hairpin", variant={"proxyMode": "iptables"}) as cluster:
        yield cluster


@pytest.mark.parametrize("name", list(API_CALLS))
def test_the_api_answers_every_mutant_of_its_arguments(name, api_cluster):
    """Each call with a mutated argument returns a result or raises LabError in words; never another exception
    (a TypeError, a KeyError or a traceback from deep in the pipeline), never a hang."""
    from lab.api import LabError

    call = API_CALLS[name][1]
    failures, refused = [], 0
    for number, args in api_mutants(name, API_MUTANTS):
        try:
            with time_limit(60):
                call(api_cluster, *args)
        except LabError as exc:
            refused += 1
            if not str(exc).strip() or "Traceback" in str(exc):
                failures.append(f"{name} mutant {number} {args!r:.160}: LabError without words: {exc!r:.200}")
        except Hung:
            failures.append(f"{name} mutant {number} {args!r:.160}: no answer within 60 s")
        except Exception as exc:  # noqa: BLE001 - anything but LabError is what a caller would not expect
            failures.append(f"{name} mutant {number} {args!r:.160}: {type(exc).__name__}: {exc}"[:400])
    assert not failures, f"{len(failures)} of {API_MUTANTS} mutants (seed {SEED}):\n" + "\n".join(failures[:30])
    assert refused >= API_MUTANTS // 4, f"too few mutants refused: {refused}"


# --- requests to a live lab's keeper ---------------------------------------------------------------------------

REQUESTS = [
    '{"name": "closes-[/]", "verbose": false, "width": 120, "color": false}',
    '{"from": "node1", "to": "web:80", "protocol": "TCP", "via": "clusterIP", "width": 80}',
]
REQUEST_MUTANTS = 150
# JSON a schema has to refuse or survive: numbers past any int or float, nesting, types, long and odd strings.
JSON_VALUES = [
    "1e400", "-1e400", "-1", "0", "99999999999999999999999", "null", "true", "[]", "{}", '""', '"x"',
    '"' + "x" * 300 + '"', '"[bold red]x[/]"', '"\\u001b[31m"', '"\\ud800"', "[" * 300 + "]" * 300, "NaN",
]  # fmt: skip
JSON_FRAGMENTS = ["[", "]", "{", "}", ",", ":", '"', "\\", '"extra": 1, ', "\n", " " * 70_000]


def _valid_value(rng: random.Random, text: str) -> str:
    """An edit the schema accepts (a width, a flag flipped): some mutants must still run a probe."""
    if rng.random() < 0.5:
        return re.sub(r'("width": )\d+', lambda m: f"{m.group(1)}{rng.randint(20, 400)}", text)
    return re.sub(r"\b(true|false)\b", lambda m: rng.choice(["true", "false"]), text)


REQUEST_EDITS: list[TextEdit] = [
    _valid_value,
    _valid_value,
    lambda rng, t: _replace_scalar(rng, t, JSON_VALUES),
    lambda rng, t: _insert(rng, t, rng.choice(JSON_FRAGMENTS)),
    lambda rng, t: t[: rng.randrange(len(t) + 1)],
]


@pytest.fixture
def live_lab():
    scenario = REPO / "tests" / "integration" / "topologies" / "markup-names.yaml"
    up = subprocess.run([sys.executable, "-m", "lab", "up", str(scenario)], capture_output=True, text=True, timeout=120)
    prefix = up.stdout.split(":", 1)[0]
    assert up.returncode == 0 and prefix.startswith("lab-"), up.stderr
    try:
        yield prefix
    finally:
        subprocess.run([sys.executable, "-m", "lab", "down", prefix], capture_output=True, timeout=120)


def ask(prefix: str, data: bytes) -> object:
    """One request line to the keeper, under the hang limit; its answer as JSON."""
    with time_limit(HANG_SECONDS), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(f"/run/lab/{prefix}.sock")
        sock.sendall(data + b"\n")
        return json.loads(sock.makefile("rb").readline())


@pytest.mark.xdist_group("lab-down")  # as test_live_lab's: a bare `lab down` of another test never takes this lab
def test_a_live_keeper_answers_every_mutant_of_a_request(live_lab):
    """Every mutant answered with an error or a probe's result, and the keeper answers a good request after."""
    answered, failures = {"error": 0, "result": 0}, []
    for index, original in enumerate(REQUESTS):
        for number, data in mutants(original, REQUEST_EDITS, SEED + index, REQUEST_MUTANTS // len(REQUESTS)):
            try:
                answer = ask(live_lab, data.replace(b"\n", b" "))
            except (Hung, OSError, ValueError) as exc:
                failures.append(f"request {index}/{number} {data[:120]!r}: {type(exc).__name__}: {exc}")
                continue
            if isinstance(answer, dict) and isinstance(answer.get("error"), str):
                answered["error"] += 1
            elif isinstance(answer, dict) and {"ok", "text", "record"} <= answer.keys():
                answered["result"] += 1
            else:
                failures.append(f"request {index}/{number} {data[:120]!r}: answered {answer!r:.200}")
    assert not failures, f"{len(failures)} mutants (seed {SEED}):\n" + "\n".join(failures[:20])
    assert answered["error"] >= REQUEST_MUTANTS // 4 and answered["result"] >= 3, answered
    good = ask(live_lab, REQUESTS[0].encode())
    assert isinstance(good, dict) and good.get("record", {}).get("probe") == "closes-[/]", good


def test_the_mutator_is_deterministic_and_reaches_every_kind_of_edit():
    original = CATALOGUE[0].read_text()
    first = list(mutants(original, SCENARIO_EDITS, SEED, 50))
    assert first == list(mutants(original, SCENARIO_EDITS, SEED, 50))
    assert len({data for _, data in first}) > 45  # nearly all distinct
    assert any(not data.decode("utf-8", "replace").isprintable() for _, data in first)
