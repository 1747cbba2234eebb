"""A file given to lab, which runs as root (often through sudo), is never read through a symlink at the end of its
path, is read under sudo only if the calling user could read it themselves, and is quoted in no error until it is
recognised as the kind of file expected (a scenario, kubectl output, a dump of the option's kind).

Each reader is tried with a symlink to a root-only file of its own (mode 0600), with a file of the wrong kind, and,
with SUDO_UID set to an unprivileged user (65534), with a file that user could not read: each is refused in
words, with the exit status `lab --help` gives (2), and not one word of the file reaches standard output or error.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import lab
from lab import cli
from lab.api import LabError
from lab.cli import parser
from lab.describe import readfile
from lab.describe.readfile import ReadError
from lab.install.tools import InstallError
from lab.replay.run import replay_from_args

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "topologies" / "hairpin.yaml"
NOBODY = 65534  # an unprivileged user and group of every Debian system (nobody, nogroup)

# What a root-only file might hold: shadow lines, and YAML that would otherwise reach a field's error message.
SECRET = "root:$y$j9T$Kq7saltSECRETa1:19000:0:99999:7:::\nname: Leaked Name b2\npassword: hunter2-SECRETc3\n"
# /etc/passwd as it looks: text that YAML reads as one long string.
PASSWD = "root:x:0:0:root-SECRETd4:/root:/bin/bash\ndaemon:x:1:1:daemon-SECRETe5:/usr/sbin:/usr/sbin/nologin\n"

LINK_REFUSED = "is a symbolic link: lab does not follow links on input; give the file itself"
UNRECOGNISED = "lab quotes nothing of a file it does not recognise"
DUMPS = ("rules", "rules6", "nft", "ipsets", "ipvs")


def lab_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """lab as the user runs it: its own process, its exit status."""
    return subprocess.run(
        [sys.executable, "-m", "lab", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        env={**os.environ, **(env or {})},
    )


def said(done: subprocess.CompletedProcess) -> str:
    return " ".join(done.stderr.split())  # the terminal wraps long lines


@pytest.fixture
def run_lab(capsys: pytest.CaptureFixture[str]) -> Callable[..., subprocess.CompletedProcess]:
    """lab's command line in this process (lab.cli.main, as `python -m lab` calls it): fast enough to try every
    reader; its exit status and output as a finished process's."""

    def run(*args: str) -> subprocess.CompletedProcess:
        with pytest.raises(SystemExit) as exited:
            cli.main(list(args))
        output = capsys.readouterr()
        return subprocess.CompletedProcess(args, exited.value.code, output.out, output.err)

    return run


def quoted_in(output: str, content: str) -> list[str]:
    """The words of `content` that are its own (split at its separators, with a capital or a digit: not `name`, which
    lab's messages say too) that `output` holds, outside the paths it names."""
    outside_paths = re.sub(r"/tmp/\S+", "", output)
    words = content.replace(":", " ").replace("$", " ").split()
    return [w for w in words if len(w) >= 3 and re.search(r"[A-Z0-9]", w) and w in outside_paths]


def secret_and_link(tmp_path: Path, content: str = SECRET) -> tuple[Path, Path]:
    """A root-only file (mode 0600) and a symlink to it."""
    secret = tmp_path / "secret"
    secret.write_text(content)
    secret.chmod(0o600)
    link = tmp_path / "link.yaml"
    link.symlink_to(secret)
    return secret, link


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory anyone may enter (pytest's own tmp_path sits in a directory only its user may)."""
    path = Path(tempfile.mkdtemp(prefix="lab-input-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def as_nobody() -> dict[str, str]:
    return {"SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY)}


def sudo_as_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in as_nobody().items():
        monkeypatch.setenv(name, value)


def a_dump(directory: Path) -> Path:
    """The least iptables-save dump, read before the scenario (lab diff) or the ipset and ipvs dumps (lab replay)."""
    path = directory / "rules"
    path.write_text("*nat\nCOMMIT\n")
    path.chmod(0o644)
    return path


def cli_readers(path: Path, dump: Path) -> dict[str, list[str]]:
    """Every command that reads a file from the command line, reading `path` in each of its roles."""
    readers = {
        "validate": ["validate", str(path)],
        "import": ["import", str(path)],
        "diff's scenario": ["diff", str(path), "--node", "node1", "--rules", str(dump)],
    }
    for dump in DUMPS:
        readers[f"diff --{dump}"] = ["diff", str(SCENARIO), "--node", "node1", f"--{dump}", str(path)]
    return readers


def test_every_reader_refuses_a_symlink_in_words_and_quotes_nothing(tmp_path, run_lab):
    _, link = secret_and_link(tmp_path)
    for name, argv in cli_readers(link, a_dump(tmp_path)).items():
        done = run_lab(*argv)
        assert done.returncode == 2, (name, done.stderr)
        assert f"{link}: {LINK_REFUSED}" in said(done), (name, done.stderr)
        assert quoted_in(done.stdout + done.stderr, SECRET) == [], (name, done.stderr)


def test_replay_refuses_a_symlinked_dump_of_each_kind(tmp_path):
    _, link = secret_and_link(tmp_path)
    rules = a_dump(tmp_path)
    probe = ["--node-ip", "10.0.0.1", "--from", "10.0.0.2", "--to", "10.96.0.10:80"]
    for dump in DUMPS:
        given = ["--rules", str(rules)] if dump in ("ipsets", "ipvs") else []
        with pytest.raises(InstallError) as refused:
            replay_from_args(parser().parse_args(["replay", f"--{dump}", str(link), *given, *probe]))
        assert f"--{dump} {link}: {LINK_REFUSED}" == str(refused.value), dump


@pytest.mark.skipif(os.geteuid() != 0, reason="lab.up refuses before reading without root")
def test_the_api_refuses_a_symlinked_scenario(tmp_path):
    _, link = secret_and_link(tmp_path)
    with pytest.raises(LabError) as refused, lab.up(str(link)):
        pass
    assert LINK_REFUSED in str(refused.value) and quoted_in(str(refused.value), SECRET) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="lab.up refuses before reading without root")
def test_the_api_under_sudo_refuses_a_file_the_caller_could_not_read(open_dir, monkeypatch):
    secret = open_dir / "s.yaml"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    sudo_as_nobody(monkeypatch)
    with pytest.raises(LabError) as refused, lab.up(str(secret)):
        pass
    assert f"(uid {NOBODY}) may not read this file" in str(refused.value)
    assert quoted_in(str(refused.value), SECRET) == []


def test_the_command_line_exits_2_on_a_symlink_and_quotes_nothing(tmp_path):
    _, link = secret_and_link(tmp_path)
    done = lab_cli("validate", str(link))
    assert done.returncode == 2 and said(done) == f"error: {link}: {LINK_REFUSED}"
    assert quoted_in(done.stdout + done.stderr, SECRET) == []


def test_a_link_in_a_directory_above_is_no_concern_without_sudo(tmp_path, run_lab):
    """Only the path's last component is never followed: a directory reached through a link is the user's choice,
    and under sudo the caller's rights are checked where the file really is (below)."""
    (tmp_path / "real").mkdir()
    shutil.copy(SCENARIO, tmp_path / "real" / "s.yaml")
    (tmp_path / "via").symlink_to(tmp_path / "real")
    assert run_lab("validate", str(tmp_path / "via" / "s.yaml")).returncode == 0


@pytest.mark.parametrize(
    ("mode", "directory_mode", "refused"),
    [
        (0o600, 0o755, "may not read this file"),
        (0o640, 0o755, "may not read this file"),  # root's group, not the caller's
        (0o644, 0o700, "may not enter"),
        (0o644, 0o755, ""),
    ],
)
def test_under_sudo_every_reader_reads_only_what_the_caller_could(
    open_dir, run_lab, monkeypatch, mode, directory_mode, refused
):
    inner = open_dir / "inner"
    inner.mkdir()
    path = inner / "input.yaml"
    path.write_text(SECRET)
    path.chmod(mode)
    inner.chmod(directory_mode)
    sudo_as_nobody(monkeypatch)
    for name, argv in cli_readers(path, a_dump(open_dir)).items():
        done = run_lab(*argv)
        assert done.returncode == 2, (name, done.stderr)
        assert quoted_in(done.stdout + done.stderr, SECRET) == [], (name, done.stderr)
        if refused:
            assert f"the user who ran lab through sudo (uid {NOBODY}) {refused}" in said(done), (name, done.stderr)
        else:  # read, and refused as no file of the kind expected
            assert UNRECOGNISED in said(done) and "sudo" not in said(done), (name, done.stderr)


def test_under_sudo_a_scenario_the_caller_may_read_runs_as_ever(open_dir):
    shutil.copy(SCENARIO, open_dir / "s.yaml")
    (open_dir / "s.yaml").chmod(0o644)
    done = lab_cli("validate", str(open_dir / "s.yaml"), env=as_nobody())  # sudo's variables as sudo sets them
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another group needs root")
@pytest.mark.parametrize(("mode", "readable"), [(0o640, True), (0o604, False)])
def test_the_callers_group_is_judged_as_the_kernel_judges_it(open_dir, monkeypatch, mode, readable):
    """The group's bits decide for a member of the file's group, even when other users may read it (0604)."""
    path = open_dir / "f"
    path.write_text("x")
    os.chown(path, 0, NOBODY)
    path.chmod(mode)
    sudo_as_nobody(monkeypatch)
    if readable:
        assert readfile.read_text(path) == "x"
    else:
        with pytest.raises(ReadError, match="may not read this file"):
            readfile.read_text(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another group needs root")
def test_the_callers_supplementary_groups_count(open_dir, monkeypatch):
    """SUDO_GID is the caller's primary group; the others come from the group database (os.getgrouplist)."""
    member = next(((g.gr_gid, g.gr_mem[0]) for g in grp.getgrall() if g.gr_mem), None)
    if member is None:
        pytest.skip("no user of this machine is in a group besides their own")
    gid, name = member
    user = pwd.getpwnam(name)
    assert user.pw_gid != gid  # a supplementary group, not the primary one sudo names
    monkeypatch.setenv("SUDO_UID", str(user.pw_uid))
    monkeypatch.setenv("SUDO_GID", str(user.pw_gid))
    path = open_dir / "f"
    path.write_text("x")
    os.chown(path, 0, gid)
    path.chmod(0o640)
    assert readfile.read_text(path) == "x"
    path.chmod(0o600)
    with pytest.raises(ReadError, match="may not read this file"):
        readfile.read_text(path)


def test_without_sudo_or_for_lab_own_state_nothing_is_checked(open_dir, monkeypatch):
    path = open_dir / "state"
    path.write_text("x")
    path.chmod(0o600)
    monkeypatch.delenv("SUDO_UID", raising=False)
    assert readfile.read_text(path) == "x"
    sudo_as_nobody(monkeypatch)
    assert readfile.read_text(path, caller=False) == "x"
    monkeypatch.setenv("SUDO_UID", "0")  # root ran sudo: root's rights
    assert readfile.read_text(path) == "x"


def test_lab_own_state_is_never_read_through_a_link_either(tmp_path):
    _, link = secret_and_link(tmp_path)
    with pytest.raises(ReadError, match="is a symbolic link"):
        readfile.read_text(link, caller=False)


@pytest.mark.parametrize(
    ("reader", "content"),
    [
        ("validate", SECRET),
        ("validate", PASSWD),
        ("import", SECRET),
        ("import", PASSWD),
        *((f"--{dump}", text) for dump in DUMPS for text in (SECRET, PASSWD)),
    ],
)
def test_a_file_of_another_kind_is_refused_by_its_lines_never_its_text(tmp_path, run_lab, reader, content):
    path = tmp_path / "given"
    path.write_text(content)
    if reader.startswith("--"):
        argv = ["diff", str(SCENARIO), "--node", "node1", reader, str(path)]
    else:
        argv = [reader, str(path)]
    done = run_lab(*argv)
    assert done.returncode == 2, done.stderr
    assert UNRECOGNISED in said(done) and f"{path}" in said(done) and "1" in said(done), done.stderr
    assert quoted_in(done.stdout + done.stderr, content) == [], done.stderr


def test_import_from_standard_input_quotes_nothing_of_what_is_no_kubectl_output():
    done = subprocess.run(
        [sys.executable, "-m", "lab", "import", "-"],
        input=PASSWD,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 2 and "<stdin>:1: not kubectl output" in said(done), done.stderr
    assert quoted_in(done.stdout + done.stderr, PASSWD) == []


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        ("name: *aliasSECRET\n", 1, "found undefined alias"),
        ("name: &aSECRET x\nnodes: &aSECRET y\n", 2, "found duplicate anchor"),
        ('name: "x\\qSECRET"\n', 1, "found unknown escape character (column"),  # not which: 'q'
        ("name: [1\nnodes: aSECRET\n", 2, "expected ',' or ']'"),  # the grammar's own quotes stay
        ("name:\n\tbSECRET: 1\n", 2, "found character that cannot start any token"),
        ("name: bSECRET\x07\n", 1, "a control character cannot appear in YAML (column 14)"),
        ("name: bSECRET\n\xff\n", 2, "not UTF-8 text (byte 1 of the line is not)"),
    ],
)
def test_yaml_that_does_not_parse_is_refused_by_place_never_by_its_text(tmp_path, run_lab, content, line, words):
    path = tmp_path / "given.yaml"
    path.write_bytes(content.encode("utf-8", "surrogateescape") if "\xff" not in content else content.encode("latin-1"))
    done = run_lab("validate", str(path))
    assert done.returncode == 2 and f"{path}:{line}: " in said(done) and words in said(done), done.stderr
    assert "SECRET" not in done.stdout + done.stderr, done.stderr
    done = run_lab("import", str(path))  # no kubectl output either way: refused before or as not YAML
    assert done.returncode == 2 and f"{path}:" in said(done) and "SECRET" not in done.stdout + done.stderr


def test_a_scenario_with_a_misspelt_field_is_still_one_and_named(tmp_path, run_lab):
    """Recognised by its fields (all of name, nodes and probes, or no field a scenario lacks), a scenario's errors
    quote it as ever: a misspelt field is named, with what it may have meant."""
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.read_text().replace("\nprobes:", "\nprobs: []\nprobes:", 1))
    done = run_lab("validate", str(path))
    assert done.returncode == 2 and "probs: unknown field" in said(done), done.stderr


def test_a_dump_of_the_right_kind_is_quoted_where_it_is_wrong(tmp_path, run_lab):
    """Once the first line is the dump's own, the review names the word it refuses."""
    path = tmp_path / "nft"
    path.write_text("table ip kube-proxy {\n}\nbogus-command here\n")
    done = run_lab("diff", str(SCENARIO), "--node", "node1", "--nft", str(path))
    assert done.returncode == 2 and f"--nft {path} line 3: `bogus-command` is no part of a ruleset" in said(done)
