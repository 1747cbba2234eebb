"""The command line as a user runs it, where no root is needed: `lab render`, and mistakes on the command
line, which are named before anything is built."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cli

REPO = Path(__file__).resolve().parents[2]


def lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO, check=False)


def lab_render(*args: str) -> subprocess.CompletedProcess:
    return lab("render", *args)


def test_nftables_render_prints_the_transaction():
    done = lab_render(
        "topologies/lb-local-from-pods.yaml", "--node", "node2",
        "--variant", "proxyMode=nftables", "--variant", "kubeVersion=1.34", "--variant", "kubeProxyClusterCIDR=true",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('add table ip kube-proxy { comment "rules for kube-proxy" ; }\n')


def test_nftables_for_a_version_without_it_names_the_supported_ones():
    done = lab_render("topologies/externalip-node-ip.yaml", "--node", "node2", "--variant", "proxyMode=nftables")
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and not done.stdout
    assert "externalip-node-ip.yaml: kube-proxy 1.20's nftables mode is not reproduced" in said
    assert "supported: 1.30, 1.31" in said and "Traceback" not in said


def said(done: subprocess.CompletedProcess) -> str:
    return " ".join(done.stderr.split())  # the terminal wraps long lines


def test_a_variant_filter_that_matches_nothing_lists_the_variants():
    done = lab("run", "topologies/hairpin.yaml", "--variant", "proxyMode=bogus")
    assert done.returncode == 2 and not done.stdout
    assert (
        "no variant matches --variant proxyMode=bogus; the variants are: proxyMode=iptables, hairpinMode=hairpin-veth; "
        in said(done)
    )


def test_a_variant_without_value_and_an_unknown_probe_are_refused():
    done = lab("run", "topologies/hairpin.yaml", "--variant", "proxyMode")
    assert done.returncode == 2 and "expected KEY=VALUE, e.g. proxyMode=ipvs, got 'proxyMode'" in said(done)
    done = lab("run", "topologies/hairpin.yaml", "--probe", "nope")
    assert done.returncode == 2
    assert (
        "no probe named nope; the probes are: neighbour-to-service, other-node-to-service, pod-to-own-service"
        in said(done)
    )


def test_bench_scale_wants_numbers():
    done = lab("bench", "--scale", "10,x")
    assert done.returncode == 2 and "expected positive numbers separated by commas" in said(done)


def test_an_ipv6_service_address_is_named():
    done = lab("validate", "tests/unit/fixtures/ipv6-external-ip.yaml")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert said(done) == (
        "error: tests/unit/fixtures/ipv6-external-ip.yaml:20: workload[1].spec.externalIPs[0]: "
        "expected an IPv4 address (the cluster is IPv4 only), got '2001:db8::1'"
    )


def test_durations_and_counts_are_checked_by_the_flag():
    for value in ("0", "-1", "nan", "inf", "x"):
        for command in (["run", "topologies/hairpin.yaml"], ["replay", "--rules", "r", "--node-ip", "1.2.3.4"]):
            done = lab(*command, "--from", "1.1.1.1", "--to", "2.2.2.2:1", "--timeout", value)
            assert done.returncode == 2 and "argument --timeout: expected seconds, a number above 0" in said(done)
            assert "Traceback" not in done.stderr
    done = lab("bench", "--repeat", "0")
    assert done.returncode == 2 and "argument --repeat: expected a whole number from 1 to 1000, got '0'" in said(done)
    done = lab("vm", "run", "--timeout", "inf", "--", "true")
    assert done.returncode == 2 and "argument --timeout: expected seconds" in said(done)


def test_compare_needs_an_axis_that_exists_and_markdown_needs_compare():
    done = lab("run", "topologies/hairpin.yaml", "--compare", "proxyMod")
    assert done.returncode == 2
    assert "--compare proxyMod: no matrix axis named proxyMod; the axes are: hairpinMode, proxyMode" in said(done)
    done = lab("run", "topologies/hairpin.yaml", "--markdown")
    assert done.returncode == 2 and "--markdown prints the --compare tables: give --compare AXIS too" in said(done)


def test_version():
    done = lab("--version")
    assert done.returncode == 0 and done.stdout.startswith("lab ")


def lab_as_nobody(*args: str) -> subprocess.CompletedProcess:
    """lab run by a user who is not root (by nobody, when the tests run as root)."""
    # nobody keeps the right to read directories (CAP_DAC_READ_SEARCH): a checkout inside a mode-700 directory,
    # as `mktemp -d` makes, must still be importable; the user is no more root for it.
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    can_read = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    as_nobody = [] if os.geteuid() else [*nobody, *can_read]
    return subprocess.run(
        [*as_nobody, sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO, check=False
    )


def test_vm_run_refuses_a_user_who_is_not_root():
    done = lab_as_nobody("vm", "run", "--", "true")
    assert done.returncode == 2 and "lab vm run needs root" in said(done) and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["ls"], "the live labs' records, in /run/lab, are root's alone"),
        (["down"], "it stops the lab's keeper, a root process, and removes the namespaces its run recorded"),
        (["probe", "p"], "the lab's keeper answers on a socket only root may open, in /run/lab"),
        (
            ["exec", "client", "--", "true"],
            "it runs the command in the lab's network namespace, which only root may enter",
        ),
        (["shell", "client"], "it starts the shell in the lab's network namespace, which only root may enter"),
    ],
)
def test_a_live_lab_command_says_why_it_needs_root_in_its_own_words(argv, why):
    done = lab_as_nobody(*argv)
    assert done.returncode == 2 and said(done) == f"lab {argv[0]} needs root: {why}. Run it with sudo.", said(done)


def test_without_files_only_the_shipped_catalogue_runs_never_the_working_directorys(tmp_path):
    (tmp_path / "topologies").mkdir()
    (tmp_path / "topologies" / "planted.yaml").write_text("name: planted\n")
    done = subprocess.run(
        [sys.executable, "-m", "lab", "validate"], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "planted" not in done.stdout and "hairpin.yaml: ok" in done.stdout


def test_pytest_collects_a_scenario_file_named_on_its_command_line_wherever_it_lives(tmp_path):
    (tmp_path / "mine.yml").write_text((REPO / "topologies" / "hairpin.yaml").read_text())
    (tmp_path / "broken.yaml").write_text("name: x\nnodes: 3\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "mine.yml", "broken.yaml"],
        capture_output=True, text=True, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert "pod-to-own-service[" in done.stdout and "tests collected" in done.stdout
    assert "broken.yaml:2: nodes: expected a list" in done.stdout
    assert "Traceback" not in done.stdout


@pytest.mark.parametrize(
    ("line", "offered"),
    [("lab ex", {"exec"}), ("lab run --ht", {"--html"}), ("lab probe --v", {"--via", "--verbose"})],
)
def test_bash_completion_offers_commands_and_flags(tmp_path, line, offered):
    """What bash gets from `eval "$(register-python-argcomplete lab)"`: argcomplete drives lab's own parser."""
    out = tmp_path / "completions"
    env = dict(os.environ, COMP_LINE=line, COMP_POINT=str(len(line)), _ARGCOMPLETE="1")
    env["_ARGCOMPLETE_STDOUT_FILENAME"] = str(out)
    subprocess.run([sys.executable, "-m", "lab"], env=env, capture_output=True, timeout=60, check=False)
    assert set(out.read_text().split()) == offered


def _commands(parser: argparse.ArgumentParser, prefix: str = "lab") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser, `lab vm run` included, by its name."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = _commands(sub, f"{prefix} {name}")
                found += inner or [(f"{prefix} {name}", sub)]
    return found


@pytest.mark.parametrize(("command", "sub"), _commands(cli.parser()), ids=lambda c: c if isinstance(c, str) else "")
def test_every_command_says_what_it_does_its_exit_statuses_and_each_option(command, sub):
    assert sub.description, f"{command} --help has no summary"
    assert "exit status:" in (sub.epilog or "") or "Exits with" in sub.description, f"{command}: no exit statuses"
    unexplained = [a.option_strings or a.dest for a in sub._actions if not a.help and a.dest != "help"]
    assert unexplained == [], f"{command} --help says nothing of {unexplained}"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["prboe"], "invalid choice: 'prboe' (choose from 'run', 'render', "),
        (["prboe"], "'vm'); did you mean probe?"),
        (["vm", "rnu"], "invalid choice: 'rnu' (choose from 'run', 'matrix'); did you mean run?"),
        (["probe", "--via", "nodeport"], "'loadBalancer'); did you mean nodePort?"),
        (["probe", "--fron", "client"], "lab probe: error: unrecognized arguments: --fron; did you mean --from?"),
        (["run", "--jsno=1"], "lab run: error: unrecognized arguments: --jsno=1; did you mean --json?"),
        (
            ["render", "f.yaml", "--ndoe", "n"],
            "required: --node (--ndoe is no option of lab render: did you mean --node?)",
        ),
    ],
)
def test_a_misspelt_command_choice_or_option_gets_the_closest_known_one(capsys, argv, said):
    with pytest.raises(SystemExit) as exited:
        cli.parser().parse_args(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert said in error, error
    assert error.count("did you mean") == 1, error


def test_an_abbreviation_argparse_takes_and_what_follows_dashes_are_no_misspelling(capsys):
    assert cli.parser().parse_args(["probe", "--verb", "x"]).verbose
    assert cli.parser().parse_args(["exec", "client", "--", "curl", "--fron"]).command == ["curl", "--fron"]


def _long_options(sub: argparse.ArgumentParser) -> list[str]:
    return [o for a in sub._actions for o in a.option_strings if o.startswith("--") and o != "--help"]


@pytest.mark.parametrize(
    ("command", "sub"),
    [(command, sub) for command, sub in _commands(cli.parser()) if _long_options(sub)],
    ids=lambda c: c if isinstance(c, str) else "",
)
def test_every_commands_options_are_suggested_when_misspelt(capsys, command, sub):
    options = _long_options(sub)
    misspelt = options[0][:-1] + "#"
    with pytest.raises(SystemExit):
        sub.parse_known_args([misspelt])
    assert f"did you mean {options[0]}?" in capsys.readouterr().err
