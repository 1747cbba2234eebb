"""Which scenario files, matrix axes and variants a command works on, shared by lab's commands (cli.py, and the
live lab's live/cli.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from lab.describe.errors import ScenarioError
from lab.describe.load import Scenario, load_scenario
from lab.describe.topology import Topology, axis_text
from lab.doctor import machine_arch, running_kernel
from lab.helptext import MATRIX, VARIANT
from lab.report.literal import literal

err = Console(stderr=True, soft_wrap=True)  # messages are one line each: grep finds them


# The catalogue this checkout ships. Never ./topologies of wherever lab is started: a scenario runs commands as
# root (`before: run:`), so only files the user names, or the ones shipped with lab, are ever run.
CATALOGUE = Path(__file__).resolve().parent.parent / "topologies"


def default_scenarios() -> list[Path]:
    return sorted(CATALOGUE.glob("*.yaml"))


# Why each command that needs root does: what it does as root, in the words of that command.
_AS_ROOT = {
    "run": "it builds network namespaces",
    "bench": "it builds network namespaces",
    "replay": "it builds a network namespace and loads the dump's rules into it",
    "up": "it builds network namespaces and keeps them running",
    "ls": "the live labs' records, in /run/lab, are root's alone",
    "exec": "it runs the command in the lab's network namespace, which only root may enter",
    "shell": "it starts the shell in the lab's network namespace, which only root may enter",
    "probe": "the lab's keeper answers on a socket only root may open, in /run/lab",
    "down": "it stops the lab's keeper, a root process, and removes the namespaces its run recorded",
}


def require_root(command: str) -> None:
    if os.geteuid() != 0:
        err.print(f"[red]lab {command} needs root[/red]: {_AS_ROOT[command]}. Run it with sudo.")
        sys.exit(2)


def scenario_paths(files: list[str]) -> list[Path]:
    paths = [Path(f) for f in files] or default_scenarios()
    if not paths:
        err.print(literal(f"no scenario files given and no catalogue in {CATALOGUE}"))
        sys.exit(2)
    return paths


def load_all(files: list[str], matrix: list[str] | None = None) -> list[Scenario]:
    paths = scenario_paths(files)
    axes = {}
    for item in matrix or []:
        key, _, values = item.partition("=")
        if not values:
            err.print(literal(f"--matrix {item}: expected KEY=VALUE[,VALUE...], e.g. proxyMode=iptables,nftables"))
            sys.exit(2)
        if key in axes:
            err.print(literal(f"--matrix {item}: {key} is given twice; list every value once, e.g. {key}=A,B"))
            sys.exit(2)
        axes[key] = values.split(",")
    kernel = running_kernel()  # read once, for every file: what `when: {kernel: ...}` is judged against
    return [load_scenario(p, axes, kernel=kernel, arch=machine_arch()) for p in paths]


def key_value(text: str) -> str:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. proxyMode=ipvs, got {text!r}")
    return text


def add_variant_flags(parser: argparse.ArgumentParser, chosen: str) -> None:
    """--variant and --matrix, as every command that loads scenarios takes them; `chosen` says which variants
    --variant picks ("run only the variants", "build the first variant")."""
    parser.add_argument(
        "--variant", action="append", default=[], type=key_value, metavar="KEY=VALUE", help=f"{chosen} {VARIANT}"
    )
    parser.add_argument("--matrix", action="append", metavar="KEY=V1,V2", help=MATRIX)


def counts(text: str) -> list[int]:
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive numbers separated by commas, e.g. 10,100,1000, got {text!r}"
        )
    return counts


def no_variant(scenarios: list[Scenario], variant_filter: list[str]) -> str:
    labels = sorted({t.variant_label for scenario in scenarios for t in scenario.variants})
    return f"no variant matches --variant {' '.join(variant_filter)}; the variants are: {'; '.join(labels)}"


def select(scenario: Scenario, variant_filter: list[str]) -> list[Topology]:
    wanted: dict[str, str] = {}
    for item in variant_filter:
        key, value = item.split("=", 1)
        if key in wanted:
            # A variant has one value per axis: keeping either one would run what the user did not ask for.
            raise ScenarioError(
                f"--variant {key}={wanted[key]} --variant {item}",
                None,
                "",
                f"{key} is given twice; a variant has one value of {key}: give --variant {key}=VALUE once "
                f"(--matrix {key}=A,B runs several)",
            )
        wanted[key] = value
    return [t for t in scenario.variants if all(axis_text(dict(t.variant).get(k, "")) == v for k, v in wanted.items())]


def first_runnable(
    file: str, variants: list[Topology], cannot_run: Callable[[Topology], str]
) -> tuple[Topology | None, list[str]]:
    """The first of `variants` this machine can run (an ipvs one needs ip_vs), and what to tell the user: which
    was picked among how many, and why each before it was passed over; None, with every variant's reason, when
    none can run."""
    reasons = [cannot_run(t) for t in variants]
    if all(reasons):
        return None, [
            f"{file} ({t.variant_label}) cannot run here: {why}" for t, why in zip(variants, reasons, strict=True)
        ]
    chosen = reasons.index("")
    topo = variants[chosen]
    if len(variants) == 1:
        return topo, []
    others = "; ".join(t.variant_label for t in variants if t is not topo)
    said = [f"{topo.variant_label}: the first of {len(variants)} variants that runs here (--variant picks: {others})"]
    said += [
        f"  passed over {t.variant_label}: {why}" for t, why in zip(variants[:chosen], reasons[:chosen], strict=True)
    ]
    return topo, said
