"""Which scenario files, matrix axes and variants a command works on, shared by lab's commands (cli.py, and the
live lab's live/cli.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from lab.describe.load import Scenario, load_scenario
from lab.describe.topology import Topology, axis_text
from lab.pipeline import running_kernel

err = Console(stderr=True, soft_wrap=True)  # messages are one line each: grep finds them


# The catalogue this checkout ships. Never ./topologies of wherever lab is started: a scenario runs commands as
# root (`before: run:`), so only files the user names, or the ones shipped with lab, are ever run.
CATALOGUE = Path(__file__).resolve().parent.parent / "topologies"


def default_scenarios() -> list[Path]:
    return sorted(CATALOGUE.glob("*.yaml"))


def require_root(command: str) -> None:
    if os.geteuid() != 0:
        err.print(f"[red]lab {command} needs root[/red]: it builds network namespaces. Run it with sudo.")
        sys.exit(2)


def scenario_paths(files: list[str]) -> list[Path]:
    paths = [Path(f) for f in files] or default_scenarios()
    if not paths:
        err.print(f"no scenario files given and no catalogue in {CATALOGUE}")
        sys.exit(2)
    return paths


def load_all(files: list[str], matrix: list[str] | None = None) -> list[Scenario]:
    paths = scenario_paths(files)
    axes = {}
    for item in matrix or []:
        key, _, values = item.partition("=")
        if not values:
            err.print(f"--matrix {item}: expected KEY=VALUE[,VALUE...], e.g. proxyMode=iptables,nftables")
            sys.exit(2)
        if key in axes:
            err.print(f"--matrix {item}: {key} is given twice; list every value once, e.g. {key}=A,B")
            sys.exit(2)
        axes[key] = values.split(",")
    kernel = running_kernel()  # read once, for every file: what `when: {kernel: ...}` is judged against
    return [load_scenario(p, axes, kernel=kernel) for p in paths]


def key_value(text: str) -> str:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. proxyMode=ipvs, got {text!r}")
    return text


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
    wanted = dict(v.split("=", 1) for v in variant_filter)
    return [t for t in scenario.variants if all(axis_text(dict(t.variant).get(k, "")) == v for k, v in wanted.items())]
