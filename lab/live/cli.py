"""cli: `lab up`, `lab ls`, `lab exec`, `lab shell`, `lab probe` and `lab down`, added to lab's parser."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from lab.helptext import NOTHING_TESTED, STOPPED, exit_codes
from lab.live import commands
from lab.live.record import LiveLabError, NotRunnable, pick
from lab.pipeline import cannot_run
from lab.report.literal import literal
from lab.selection import add_variant_flags, first_runnable, load_all, no_variant, require_root, select

out = Console(width=None if sys.stdout.isatty() else 160, highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def cmd_up(args: argparse.Namespace) -> int:
    (scenario,) = load_all([args.file], args.matrix)
    variants = select(scenario, args.variant)
    if not variants:
        err.print(literal(no_variant([scenario], args.variant)))
        return 2
    topo, said = first_runnable(args.file, variants, cannot_run)
    for line in said:
        err.print(literal(line))
    if topo is None:
        return 2
    require_root("up")
    axes = {k: [v] for k, v in topo.variant}
    for line in commands.up(Path(args.file), axes, topo):
        out.print(literal(line))
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    require_root("ls")
    for line in commands.listing():
        out.print(literal(line))
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    require_root("exec")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        argv = commands.exec_argv(args.run, args.actor, command)
    except NotRunnable as exc:
        err.print(f"lab exec: {exc}", markup=False)
        return exc.status
    os.execvp(argv[0], argv)


def cmd_shell(args: argparse.Namespace) -> int:
    require_root("shell")
    argv, env = commands.shell_argv(args.run, args.actor)
    os.execvpe(argv[0], argv, env)


def cmd_probe(args: argparse.Namespace) -> int:
    require_root("probe")
    if (args.name is None) == (args.source is None or args.to is None):
        err.print("lab probe NAME (a probe of the scenario), or lab probe --from ACTOR --to TARGET:PORT (ad hoc)")
        return 2
    request: dict = {"verbose": args.verbose, "width": out.width, "color": out.is_terminal}
    if args.name:
        request["name"] = args.name
    else:
        request |= {"from": args.source, "to": args.to, "protocol": args.protocol, "via": args.via, "node": args.node}
    answer = commands.probe(args.run, request)
    if args.json:
        print(json.dumps(answer["record"], indent=2))
    else:
        sys.stdout.write(answer["text"])
    return probe_status(answer["ok"])


def probe_status(ok: bool | None) -> int:
    """lab probe's exit status for the keeper's ok: None when the probe ran unjudged (skipped)."""
    return NOTHING_TESTED if ok is None else 0 if ok else 1


def cmd_down(args: argparse.Namespace) -> int:
    require_root("down")
    for line in commands.down(args.run, args.all):
        out.print(literal(line))
    return 0


def run_live(func):  # noqa: ANN001, ANN201 - wraps a command
    """A live lab command: its refusals are one line on stderr and exit status 2."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except LiveLabError as exc:
            err.print(Text("error: ", style="red") + literal(exc))
            return 2

    return wrapped


def _actors(**_: object) -> list[str]:
    """Completion of ACTOR: the actors of the live lab, when there is exactly one and it can be read (root)."""
    try:
        return sorted(pick(None).actors)
    except (LiveLabError, OSError):
        return []


ACTOR_HELP = "a node, pod (NAME or NAMESPACE/NAME), external host, router or load balancer, as the scenario names it"
RUN_HELP = "which live lab (its lab-xxxxxx name; needed when several are up)"


def _in_actor(
    sub: argparse._SubParsersAction, name: str, summary: str, description: str, status: str
) -> argparse.ArgumentParser:
    """A command run in ACTOR's network namespace of a live lab (exec, shell): its --run and ACTOR; `status`: its
    exit status when the lab and actor were found."""
    parser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=exit_codes((2, "no such live lab or actor, not root"), (0, f"otherwise {status}")),
    )
    parser.add_argument("--run", help=RUN_HELP)
    parser.add_argument("actor", help=ACTOR_HELP).completer = _actors  # type: ignore[attr-defined]
    return parser


def add_commands(sub: argparse._SubParsersAction) -> None:
    up = sub.add_parser(
        "up",
        help="build one variant of a scenario and keep it running (lab down takes it away)",
        description="Build one variant of FILE (the first that can run on this machine, saying why any before it "
        "were passed over; --variant picks one), install kube-proxy's rules, start the backends and keep it all "
        "running in a detached keeper process (it outlives this terminal) until `lab down`. Prints the actors, "
        "their addresses, the Services and how to reach them. Needs root.",
        epilog=exit_codes(
            (0, "the lab is up (lab ls lists it)"),
            (
                2,
                "nothing is left up: a scenario error (file:line: field), a bad flag, not root, a variant this "
                "kernel cannot run, a build that failed",
            ),
            *STOPPED,
        ),
    )
    up.add_argument("file", help="a scenario file")
    add_variant_flags(up, "build the first variant")
    up.set_defaults(func=run_live(cmd_up))

    ls = sub.add_parser(
        "ls",
        help="list the live labs",
        description="The live labs (lab up), one a line: name, variant, time up, actors, keeper's pid, file.",
        epilog=exit_codes((0, "listed (none is no error)")),
    )
    ls.set_defaults(func=run_live(cmd_ls))

    ex = _in_actor(
        sub,
        "exec",
        "run a command in an actor's network namespace in a live lab",
        "Run COMMAND as root in the network namespace of ACTOR of a live lab, with the host's tools.",
        "COMMAND's own status",
    )
    ex.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    ex.set_defaults(func=run_live(cmd_exec))

    shell = _in_actor(
        sub,
        "shell",
        "an interactive shell in an actor's network namespace in a live lab",
        "Start bash in the network namespace of ACTOR of a live lab, its prompt naming actor and run.",
        "the shell's own status",
    )
    shell.set_defaults(func=run_live(cmd_shell))

    probe = sub.add_parser(
        "probe",
        help="send a probe in a live lab: a scenario probe by name, or --from A --to B:PORT",
        description="Run a probe of the live lab's scenario (same verdict and evidence as lab run; steps before "
        "it are not run) or an ad hoc one: --to takes SERVICE:PORT, the Service NAME (default's, or the one "
        "namespace's that has it), NAMESPACE/NAME or NAME.NAMESPACE, the port by number or name (with --via and "
        "--node for a NodePort, externalIP or load balancer), NODE:PORT, POD:PORT (NAME or NAMESPACE/NAME), "
        "HOST:PORT or ADDRESS:PORT.",
        epilog=exit_codes(
            (0, "the probe passed (an ad hoc one: delivered)"),
            (1, "it failed"),
            (2, "no such live lab or probe, a refused ad hoc probe, not root"),
            (NOTHING_TESTED, "it ran, but this machine could not judge it (SKIP: the reason is printed)"),
        ),
    )
    probe.add_argument("name", nargs="?", help="a probe of the scenario")
    probe.add_argument("--run", help=RUN_HELP)
    probe.add_argument("--from", dest="source", metavar="ACTOR", help="ad hoc: the actor it is sent from")
    probe.add_argument("--to", metavar="TARGET:PORT", help="ad hoc: where it goes (see above)")
    probe.add_argument(
        "--protocol", choices=["tcp", "udp", "TCP", "UDP"], help="ad hoc: the protocol (default: the port's)"
    )
    probe.add_argument(
        "--via",
        choices=["clusterIP", "nodePort", "externalIP", "loadBalancer"],
        help="ad hoc, to a Service: which of its frontends (clusterIP)",
    )
    probe.add_argument("--node", help="with --via nodePort: whose address")
    probe.add_argument("--json", action="store_true", help="the probe's record as lab run --json prints it")
    probe.add_argument("-v", "--verbose", action="store_true", help="evidence even when the probe passes")
    probe.set_defaults(func=run_live(cmd_probe))

    down = sub.add_parser(
        "down",
        help="take a live lab down; remove what killed runs left",
        description="Take the live lab RUN down (an open `lab shell` of it is told on its terminal first) and "
        "remove what RUN left, saying nothing of other runs. Without RUN: the only live lab (with several, "
        "RUN or --all is needed), then the namespaces that lab runs recorded in /run/lab and whose process is "
        "gone (the pid no longer exists or belongs to a process started at another time). Nothing else is "
        "removed: lab-* entries in /run/netns that no run recorded, symlinks and directories are listed and left.",
        epilog=exit_codes((0, "done (what was left is listed)"), (2, "no such live lab, not root")),
    )
    down.add_argument("run", nargs="?", help="a live lab (lab ls lists them)")
    down.add_argument(
        "--all",
        action="store_true",
        help="every live lab, and the recorded namespaces of runs still alive (still never an unrecorded one)",
    )
    down.set_defaults(func=run_live(cmd_down))
