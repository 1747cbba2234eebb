# PYTHON_ARGCOMPLETE_OK
"""`lab`: reproduce Kubernetes Service networking on a real kernel.

lab run [FILE...]            build each scenario, install kube-proxy's rules, send the probes, judge
lab run --matrix proxyMode=iptables,ipvs --compare proxyMode
                             the same probes in several modes, one column each
lab run FILE --what-if PROBE  try each setting behind PROBE's translation chain on the kernel, one at a time: which
                             flip its outcome or source, and what each changes for the other probes
lab render FILE --node N     print what kube-proxy would leave on node N (iptables, ipvs's parts, or nftables)
lab validate [FILE...]       check scenario files without building anything (and warn of a Service with no pod)
lab import FILE... > s.yaml  a scenario from a cluster's kubectl get -o yaml|json, kube-proxy's ConfigMap, version
lab replay --rules F ...     install a real node's iptables-save (ipset, ipvsadm) dump, follow one packet
                             (--rules6 F: its ip6tables-save; the packet's addresses pick the family it walks)
lab replay --nft F ...       the same with a node's nft list ruleset (or kube-proxy's nftables transaction)
lab diff FILE --node N --rules F|--nft F   where a node's kube-proxy rules differ from what its release writes
lab up FILE [--variant K=V]  build one variant and keep it running; lab ls lists the live labs
lab exec ACTOR -- CMD        run CMD in an actor's namespace of a live lab (lab shell ACTOR: a shell there)
lab probe NAME|--from A --to B:PORT   a probe in the live lab: same verdict and evidence as lab run
lab down [RUN] [--all]       take a live lab down (RUN, or the only one); remove what killed runs left
lab doctor                   which kernel features and tools are present, and how to get the rest
lab bench [FILE|--replay|--steps|--scale N,..|--cluster NxP,..|--import N,P,S|--sync N,..]  time a scenario's
                             stages, replay cases, a step, N Services per mode, a generated cluster, lab import of a
                             generated one, or kube-proxy's sync of N Services per mode with traffic and kernel warnings
lab vm run/matrix -- CMD     run CMD as root under stock Debian kernels in QEMU (one kernel / several)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from importlib.metadata import version as package_version
from pathlib import Path

import argcomplete
from rich.console import Console
from rich.text import Text

from lab.api import run_variant
from lab.argtypes import Parser, count, refusing, seconds
from lab.bench.cluster import parse_sizes, run_cluster_bench
from lab.bench.imports import parse_import_size, run_import_bench
from lab.bench.scale import run_scale_bench
from lab.bench.stages import run_bench, run_replay_bench
from lab.bench.steps import run_steps_bench
from lab.bench.sync import MODES as SYNC_MODES
from lab.bench.sync import parse_modes, parse_sync_sizes, run_sync_bench, version_problem
from lab.describe.errors import ScenarioError, ScenarioErrors
from lab.describe.load import Scenario, load_scenario
from lab.describe.topology import Topology
from lab.doctor import format_checks, kernel_has, machine_arch, run_checks
from lab.helptext import DIFF, NOTHING_TESTED, STOPPED, exit_codes
from lab.import_command import add_import_command, run_import
from lab.install.tools import InstallError
from lab.judge.results import VariantRun
from lab.live.cli import add_commands as add_live_commands
from lab.probe.capture import pcap_dir
from lab.probe.evidence.base import EvidenceError
from lab.realize.enter import NamespaceError
from lab.realize.runs import remove_leftovers
from lab.realize.terminate import Terminated, handle_sigterm, stop_if_terminated
from lab.render.dataplane import node_dataplane
from lab.render.kubeproxy.iptables import DEFAULT_VERSION as KUBE_PROXY_VERSION
from lab.render.kubeproxy.nftables import check_nftables_version
from lab.replay.diff.command import diff_from_args
from lab.replay.diff.report import print_diff
from lab.replay.report import print_replay
from lab.replay.run import replay_from_args
from lab.report.compare import compare_markdown, compare_table
from lab.report.drawing import DrawingError
from lab.report.html import write_report
from lab.report.literal import literal
from lab.report.records import json_document, summary
from lab.report.sliced import sliced_line
from lab.report.terminal import print_scenario
from lab.selection import add_variant_flags, counts, load_all, no_variant, require_root, scenario_paths, select
from lab.vm.cli import add_commands
from lab.whatif_command import run_what_if

# On a terminal its width; elsewhere tables get 160 columns and messages are never wrapped (grep finds them whole).
console = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)  # messages are one line each: grep finds them


def _collect(results: list) -> Callable[[object], None]:
    def add(result: object) -> None:
        results.append(result)
        stop_if_terminated()

    return add


def ran_notes(run: VariantRun) -> list[str]:
    """What `lab run` says of a variant once it has run, named by scenario and variant: the nodes it built and the
    stand-ins, and the backend iptables-wrapper chose. Nothing for a variant this machine skipped (its table row
    says why): it built no node and started no kube-proxy, so no wrapper chose anything."""
    if run.skipped:
        return []
    topo = run.topology
    notes = [sliced_line(topo)] if topo.stand_ins else []
    if topo.cluster.iptables_backend_why:  # iptablesBackend: wrapper
        notes.append(topo.cluster.iptables_backend_why)
    return [f"{_titled(topo)}: {note}" for note in notes]


def _titled(topo: Topology) -> str:
    return f"{topo.scenario} ({topo.variant_label or 'no matrix'})"


def _check_compare(scenarios: list[Scenario], axis: str) -> str:
    """Why `--compare AXIS` cannot work on these scenarios ("" when it can)."""
    axes = {key for scenario in scenarios for t in scenario.variants for key, _ in t.variant}
    if axis in axes:
        return ""
    known = ", ".join(sorted(axes)) or "none (add one with --matrix KEY=V1,V2)"
    return f"--compare {axis}: no matrix axis named {axis}; the axes are: {known}"


def cmd_run(args: argparse.Namespace) -> int:
    if args.markdown and not args.compare:
        err.print("--markdown prints the --compare tables: give --compare AXIS too")
        return 2
    scenarios = load_all(args.files, args.matrix)
    if args.compare and (problem := _check_compare(scenarios, args.compare)):
        err.print(literal(problem))
        return 2
    selected = [(scenario, select(scenario, args.variant)) for scenario in scenarios]
    if not any(variants for _, variants in selected):
        err.print(literal(no_variant(scenarios, args.variant)))
        return 2
    if unbuilt := next((t.not_yet_built for _, variants in selected for t in variants if t.not_yet_built), ""):
        err.print(literal(unbuilt))
        return 2
    only = set(args.probe) if args.probe else None
    known = {p.name for _, variants in selected for t in variants for p in t.probes}
    if args.what_if and (others := [f for f, on in WHAT_IF_ALONE.items() if getattr(args, on)]):
        err.print(literal(f"--what-if runs every probe under each change and prints its own lines: not {others[0]}"))
        return 2
    if args.what_if and args.what_if not in known:
        err.print(literal(f"--what-if: no probe named {args.what_if}; the probes are: {', '.join(sorted(known))}"))
        return 2
    if only and not only & known:
        err.print(literal(f"no probe named {', '.join(sorted(only))}; the probes are: {', '.join(sorted(known))}"))
        return 2
    require_root("run")
    handle_sigterm()
    remove_leftovers()
    if args.what_if:
        variants = [t for _, ts in selected for t in ts]
        return run_what_if(variants, args.what_if, args.timeout, args.json, console, lambda s: err.print(literal(s)))
    all_runs = []
    reported = []  # (scenario, its runs) for --html
    finished = []  # every probe result as it comes, so an interrupted --json run still reports them
    try:
        total, done = sum(len(variants) for _, variants in selected), 0
        for scenario, variants in selected:
            runs = []
            reported.append((scenario.name, runs))
            for topo in variants:
                done += 1
                with running(f"[{done}/{total}] {_titled(topo)}"):
                    runs.append(run_variant(topo, args.timeout, args.pcap, on_result=_collect(finished), only=only))
                all_runs.append(runs[-1])
                for line in ran_notes(runs[-1]):
                    err.print(literal(line))
                stop_if_terminated()
            if args.compare and args.markdown:
                print(compare_markdown(scenario.name, runs, args.compare))
            elif args.compare:
                console.print(compare_table(scenario.name, runs, args.compare))
            elif not args.json:
                print_scenario(scenario.name, runs, console, verbose=args.verbose)
    except KeyboardInterrupt:
        if args.json:
            _print_json(finished, all_runs, interrupted=True)
        raise
    totals = summary(all_runs)
    if args.html:
        try:
            written = write_report(args.html, reported)
        except DrawingError as exc:
            err.print(literal(f"--html: {exc}"))
            return 2
        err.print(literal(f"report: {written}"))
    if args.json:
        _print_json(finished, all_runs, interrupted=False)
    elif not args.markdown:
        colour = "green" if totals["failed"] == 0 else "red"
        console.print(f"[{colour}]{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    if totals["failed"]:
        return 1
    if totals["skipped"] and not totals["passed"] and not args.allow_skips:
        err.print(
            f"every probe was skipped ({totals['skipped']}): nothing was tested on this machine "
            f"(exit {NOTHING_TESTED}; --allow-skips accepts it)",
            markup=False,
        )
        return NOTHING_TESTED
    return 0


# lab run's flags that --what-if does not take: it runs every probe, and prints neither tables nor a report.
WHAT_IF_ALONE = {"--probe": "probe", "--compare": "compare", "--markdown": "markdown", "--html": "html"}


def _print_json(results: list, runs: list, interrupted: bool) -> None:
    print(json.dumps(json_document(results, runs, interrupted), indent=2))


def cmd_render(args: argparse.Namespace) -> int:
    scenario = load_all([args.file], args.matrix)[0]
    variants = select(scenario, args.variant)
    if not variants:
        err.print(literal(no_variant([scenario], args.variant)))
        return 2
    topo = variants[0]
    if args.node not in {n.name for n in topo.nodes}:
        err.print(literal(f"{args.file}: no node {args.node!r}; nodes are {', '.join(n.name for n in topo.nodes)}"))
        return 2
    if len(variants) > 1:
        err.print(literal(f"# variant {topo.variant_label} (choose with --variant KEY=VALUE)"))
    if topo.cluster.proxy_mode == "nftables" and (problem := check_nftables_version(topo.cluster.kube_version)):
        err.print(literal(f"{args.file}: {problem}"))
        return 2
    print(node_dataplane(topo, args.node).text(), end="")
    return 0


def running(what: str) -> AbstractContextManager[object]:
    """Which variant runs: a status line on a terminal (gone when it ends), else one line on stderr."""
    if err.is_terminal:
        return err.status(literal(what))
    err.print(literal(f"running {what}"))
    return nullcontext()


def _error_text(exc: Exception) -> Text:
    """`error: ` and the message, as written (brackets in it, of nft rules or iptables matches, are no markup;
    control characters escaped); each of several errors of a file on a line of its own."""
    errors = exc.errors if isinstance(exc, ScenarioErrors) else [exc]
    return Text("\n").join(Text("error: ", style="red") + literal(e) for e in errors)


def cmd_validate(args: argparse.Namespace) -> int:
    failed = False
    for path in scenario_paths(args.files):  # every file is checked, whichever fail
        try:
            with err.status(literal(f"checking {path}…")) if err.is_terminal else nullcontext():
                scenario = load_scenario(path, arch=machine_arch())
        except ScenarioError as exc:
            err.print(_error_text(exc), highlight=False)
            failed = True
            continue
        probes = sum(len(v.probes) for v in scenario.variants)
        console.print(literal(f"{scenario.file}: ok ({len(scenario.variants)} variant(s), {probes} probe(s))"))
        for warning in scenario.warnings:
            console.print(Text("warning: ", style="yellow") + literal(warning), highlight=False)
    return 2 if failed else 0


def cmd_import(args: argparse.Namespace) -> int:
    return run_import(args, lambda line: err.print(Text("note: ", style="yellow") + literal(line), highlight=False))


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks()
    console.print(format_checks(checks))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    require_root("replay")
    handle_sigterm()
    result = replay_from_args(args)
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
    else:
        print_replay(result, console)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    result, note, replay = diff_from_args(args)
    if note:
        err.print(literal(note))
    if args.json:
        print(json.dumps({**result.as_json(), "note": note or None, "replay": replay}, indent=2))
    else:
        print_diff(result, console, replay)
    return 0 if result.identical else 1


def cluster_sizes(text: str) -> list[tuple[int, int]]:
    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def import_size(text: str) -> tuple[int, int, int]:
    try:
        return parse_import_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_bench(args: argparse.Namespace) -> int:
    if (args.modes or args.kube_version) and not args.sync:
        err.print("--modes and --kube-version choose what --sync times: give --sync N,... too")
        return 2
    sync_version = args.kube_version or KUBE_PROXY_VERSION
    if args.sync and (problem := version_problem(sync_version, args.modes or list(SYNC_MODES))):
        err.print(literal(f"--kube-version: {problem}"))
        return 2
    if args.imports:  # reads and writes files only: no root needed
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            return run_import_bench(args.imports, console, Path(args.out))
        with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
            return run_import_bench(args.imports, console, Path(tmp))
    require_root("bench")
    handle_sigterm()  # a killed bench unwinds like Ctrl-C: the cluster it was timing is torn down
    if args.replay:
        return run_replay_bench(args.repeat, console)
    if args.steps:
        return run_steps_bench(
            ["iptables", "nftables"] + (["ipvs"] if kernel_has("ip_vs") else []), args.repeat, console
        )
    if args.sync:
        return run_sync_bench(args.sync, args.modes or list(SYNC_MODES), sync_version, args.repeat, console)
    if args.cluster:
        with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp:
            return run_cluster_bench(args.cluster, args.repeat, console, Path(tmp))
    if args.scale:
        modes = ["iptables", "iptables-legacy", "nftables"] + (
            ["ipvs"] if kernel_has("ip_vs") and kernel_has("dummy") else []
        )
        return run_scale_bench(args.scale, modes, console)
    return run_bench(Path(args.file) if args.file else None, args.repeat, console)


def add_dump_flags(command: argparse.ArgumentParser, **helps: str) -> None:
    """A node's dump files, one flag each (--rules, --rules6, --nft, --ipsets, --ipvs), as replay and diff read them."""
    for name, text in helps.items():
        command.add_argument(f"--{name}", metavar="FILE", help=text)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="lab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version('lab')}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run scenarios (all of topologies/ when no file is given)",
        description="Build each variant of each scenario in network namespaces, install the rules kube-proxy of "
        "its version writes, run the steps and send the probes, then print per scenario what the kernel did with "
        "each probe against what the file expects (PASS or FAIL; SKIP: an affinity probe this machine was too "
        "slow to show), with the evidence of every failure (-v: of every probe). The namespaces are removed after "
        "each variant, whatever happens. Needs root.",
        epilog=exit_codes(
            (0, "every probe passed (some may have been skipped), or every probe was skipped with --allow-skips"),
            (1, "a probe failed"),
            (
                2,
                "nothing or not all was run: a scenario error (file:line: field), a bad flag, not root, a missing "
                "tool, a step that failed or ran out of time",
            ),
            (
                NOTHING_TESTED,
                "every probe was skipped: this machine can run none of the variants asked for (or was too slow to "
                "show the affinity an affinity probe asks)",
            ),
            *STOPPED,
        ),
    )
    run.add_argument("files", nargs="*", help="scenario files (default: topologies/*.yaml)")
    run.add_argument("--json", action="store_true", help="print results as JSON")
    run.add_argument(
        "--pcap", type=pcap_dir, metavar="DIR", help="keep each probe's captures under DIR (made if missing)"
    )
    run.add_argument(
        "--timeout", type=seconds(60), default=0.5, help="seconds a probe waits for an answer (0.5; at most 60)"
    )
    run.add_argument(
        "--html",
        type=pcap_dir,
        metavar="DIR",
        help="write DIR/index.html: each scenario drawn, each probe's path over it, the comparison (made if missing)",
    )
    run.add_argument("--probe", action="append", help="run only this probe (repeatable)")
    run.add_argument(
        "--what-if",
        metavar="PROBE",
        help="try, one at a time, every other value of each setting behind the rules PROBE's packets met (a Service "
        "field resynced in the lab as built; proxy mode, hairpin mode, kube-proxy flags as a new variant) and say "
        "which flip its outcome or source and what each changes for the other probes (docs/reports.md)",
    )
    run.add_argument(
        "--allow-skips",
        action="store_true",
        help=f"exit 0 when every probe was skipped (this machine cannot run any variant); else exit {NOTHING_TESTED}",
    )
    add_variant_flags(run, "run only the variants")
    run.add_argument("--compare", metavar="AXIS", help="one table per scenario with a column per value of AXIS")
    run.add_argument("--markdown", action="store_true", help="with --compare: print Markdown tables")
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show path, translation chain and rules of every probe, not only failures",
    )
    run.set_defaults(func=cmd_run)

    render = sub.add_parser(
        "render",
        help="print the rules kube-proxy would install on a node",
        description="Print what kube-proxy of the variant's version and mode leaves on NODE: the complete "
        "iptables-restore input, ipvs' parts, or the nftables transaction (then, as comments, the listeners of "
        "1.37's localhost NodePort proxy). An IPv6 or dual-stack node's proxiers are printed one per family, each "
        "under a heading naming its family and its tool (ip6tables-restore, the ip6 kube-proxy table). Builds nothing.",
        epilog=exit_codes((0, "printed"), (2, "a scenario error (file:line: field), an unknown node, a bad flag")),
    )
    render.add_argument("file", help="a scenario file")
    render.add_argument("--node", required=True, help="a node of the scenario")
    add_variant_flags(render, "render the first variant")
    render.set_defaults(func=cmd_render)

    validate = sub.add_parser(
        "validate",
        help="check scenario files (and warn of a Service with no pod)",
        description="Check scenario files without building anything: every error of a file in one pass, each "
        "with its file:line, the field and what was expected (the file's fields first, then what can still be "
        "checked against the rest of it); a file that is fine prints its variants and probes, then its warnings "
        "(a Service that selects no pod yet).",
        epilog=exit_codes((0, "every file is fine"), (2, "a file has an error")),
    )
    validate.add_argument("files", nargs="*", help="scenario files (default: topologies/*.yaml)")
    validate.set_defaults(func=cmd_validate)

    add_import_command(sub, cmd_import)

    replay = sub.add_parser(
        "replay",
        help="replay one packet through a real node's iptables or nftables dump",
        description="Build one node with the given addresses, install the dump, send real connections from --from "
        "to --to until every endpoint the rules can choose has answered, and say what the kernel did: in "
        "kube-proxy's packet-flow test words (output: the endpoints, DROP, REJECT, ACCEPT, or '' when nothing "
        "NATed it; null when the connection failed and no rule says why), whether the source was masqueraded, "
        "the rules that moved, and session affinity (-m recent) when the rules have it. A dump that cannot "
        "answer is refused: empty, without kube-proxy's chains, or with kube-proxy's chains but no built-in "
        "chain jumping there (see --add-kube-jumps). Every dump is reviewed first and refused, with its line, for "
        "what its tool never writes and what would act outside the lab (nft include, define and variables; "
        "iptables -m bpf --object-pinned, -j LED; ipset -file; ipvsadm lines other than -A and -a); each file "
        "must be a regular file of at most 4 MiB. nfacct objects the rules name are created first, as "
        "kube-proxy creates them on the node. IPv6 and dual-stack: the packet's addresses pick its family, and it "
        "walks that family's rules (ip6tables-save given with --rules6 or after iptables-save in one file; an "
        "nft ruleset's ip6 table); every family's dump is installed, the node takes --node-ip and --pod-cidr of "
        "each family, an IPv6 destination is written [ADDRESS]:PORT.",
    )
    add_dump_flags(
        replay,
        rules="iptables-save output of the node (a dual-stack node's may go on with its ip6tables-save output, after "
        "that tool's `# Generated by ip6tables-save` line)",
        rules6="ip6tables-save output of the node",
        nft="nft list ruleset output of the node (or kube-proxy's nft -f transaction), with an ip6 table on an "
        "IPv6 or dual-stack node",
        ipsets="with --rules: ipset save output of the node",
        ipvs="with --rules: ipvsadm -Sn output of the node (needs ip_vs: lab vm run)",
    )
    replay.add_argument(
        "--node-ip", action="append", required=True, metavar="IP", help="the node's addresses (of both families)"
    )
    replay.add_argument(
        "--pod-cidr",
        action="append",
        metavar="CIDR",
        help="the node's pod CIDR, one per family (sources and endpoints inside the packet's family's are pods on the "
        "node's cni0)",
    )
    replay.add_argument(
        "--from", dest="source", required=True, metavar="SRC_IP", help="the packet's source: the node, a pod or outside"
    )
    replay.add_argument(
        "--to",
        dest="dest",
        required=True,
        metavar="DST_IP:PORT",
        help="the packet's destination ([IPv6]:PORT); its family picks the rules the packet walks",
    )
    replay.add_argument("--proto", choices=["tcp", "udp"], default="tcp", help="the protocol (tcp)")
    replay.add_argument(
        "--backend", choices=["nft", "legacy"], default="nft", help="with --rules: the iptables backend (nft)"
    )
    replay.add_argument(
        "--add-kube-jumps",
        dest="kube_jumps",
        nargs="?",
        const=KUBE_PROXY_VERSION,
        metavar="VERSION",
        help="with --rules holding only kube-proxy's chains (its unit tests' goldens): add the jumps from the "
        f"built-in chains that kube-proxy VERSION ({KUBE_PROXY_VERSION}) writes to the chains the dump defines, "
        "and kubelet's KUBE-MARK-DROP / KUBE-FIREWALL where the dump uses them undefined",
    )
    replay.add_argument(
        "--timeout", type=seconds(60), default=0.5, help="seconds a connection waits for an answer (0.5; at most 60)"
    )
    replay.add_argument("--json", action="store_true", help="print the answer as JSON")
    replay.epilog = exit_codes((0, "answered"), (2, "the dump or a flag cannot answer (error: says why)"), *STOPPED)
    replay.set_defaults(func=cmd_replay)

    diff = sub.add_parser(
        "diff",
        help="where a node's kube-proxy rules differ from what its release writes for the scenario's objects",
        description=DIFF,
        epilog=exit_codes(
            (0, "identical"), (1, "differences (listed)"), (2, "a bad dump, scenario, node or flag (error: says which)")
        ),
    )
    diff.add_argument("file", help="the scenario (written by hand or by lab import) the node belongs to")
    diff.add_argument("--node", required=True, help="the node of the scenario the dumps were taken on")
    add_dump_flags(
        diff,
        rules="iptables-save of the node (iptables or ipvs mode; a dual-stack node's ip6tables-save may follow it, "
        "after its `# Generated by ip6tables-save` line)",
        rules6="ip6tables-save of the node (its IPv6 proxier's rules)",
        nft="nft list ruleset of the node (nftables mode; ip and ip6 kube-proxy tables)",
        ipsets="ipset save of the node (ipvs mode)",
        ipvs="ipvsadm -Sn or ipvsadm -Ln of the node (ipvs mode)",
    )
    add_variant_flags(diff, "compare with the first variant")
    diff.add_argument("--json", action="store_true", help="print the differences as JSON")
    diff.set_defaults(func=cmd_diff)

    doctor = sub.add_parser(
        "doctor",
        help="kernel features and tools",
        description="Which kernel features (modules, config) and tools lab uses are present, and how to get "
        "what is missing (a Debian package, lab vm for a kernel without ip_vs).",
        epilog=exit_codes((0, "the report was printed, whatever it found")),
    )
    doctor.set_defaults(func=cmd_doctor)

    bench = sub.add_parser(
        "bench",
        help="time one scenario's stages against raw ip commands",
        description="The median wall time of a scenario's build, install, probes and teardown against raw ip "
        "commands for the same objects; or of lab replay cases (--replay), one change to a running cluster "
        "(--steps), N Services per mode (--scale), a generated cluster (--cluster), lab import of a generated "
        "kubectl List (--import), kube-proxy's sync of N Services (--sync). Needs root, but for --import.",
        epilog=exit_codes(
            (0, "timed"), (1, "a probe failed during the benchmark"), (2, "a bad file or flag, not root"), *STOPPED
        ),
    )
    bench.add_argument("file", nargs="?", help="a scenario file (default: topologies/nodeport-source-ip.yaml)")
    bench.add_argument("--repeat", type=count(1000), default=5, help="runs to take the median of (5)")
    bench.add_argument("--replay", action="store_true", help="time lab replay cases instead of a scenario")
    bench.add_argument(
        "--steps",
        action="store_true",
        help="time one change to a running 3-node cluster (a Deployment scaled down: kube-proxy's sync and "
        "conntrack cleanup) per mode and era, against a sync that changes nothing",
    )
    bench.add_argument(
        "--scale",
        type=counts,
        metavar="N,N,...",
        help="install time and first-packet latency for N Services "
        "per mode (iptables with the nft and legacy backends, nftables, and ipvs where the kernel has it), "
        "e.g. 10,100,1000,10000",
    )
    bench.add_argument(
        "--cluster",
        type=cluster_sizes,
        metavar="NxP,...",
        help="a generated cluster of N nodes with P pods each behind one NodePort Service (e.g. 3x10,100x10): "
        "build (kube-proxy's first sync beside it), install, per-probe and teardown time against raw ip commands "
        "for the same objects and the build's floors (bare namespaces, the first syncs alone), each run started on "
        "an idle machine, and the kernel's cleanup after it",
    )
    bench.add_argument(
        "--import",
        dest="imports",
        type=import_size,
        action="append",
        metavar="N,P,S",
        help="time lab import (and its peak memory) of a generated kubectl List of N nodes, P pods and S Services "
        "with their EndpointSlices, beside kube-proxy's ConfigMap (repeatable, e.g. --import 100,3000,100 "
        "--import 1000,30000,1000); needs no root",
    )
    bench.add_argument("--out", metavar="DIR", help="with --import: write the generated Lists into DIR and keep them")
    bench.add_argument(
        "--sync",
        type=refusing(parse_sync_sizes),
        metavar="N,N,...",
        help="kube-proxy's full sync of N ClusterIP Services with one endpoint each on one node and a one-endpoint "
        "change, timed per mode, with a client's connections to an existing Service during the full sync and the "
        "kernel's warnings (RCU stalls, soft lockups, hung tasks, WARNINGs) from its log, e.g. 1000,5000,20000",
    )
    bench.add_argument(
        "--modes",
        type=refusing(parse_modes),
        metavar="M,M",
        help=f"with --sync: the modes, among {','.join(SYNC_MODES)} (all; ipvs where the kernel has it)",
    )
    bench.add_argument(
        "--kube-version", metavar="1.MINOR", help=f"with --sync: kube-proxy's release ({KUBE_PROXY_VERSION})"
    )
    bench.set_defaults(func=cmd_bench)

    add_live_commands(sub)
    add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> None:
    try:
        cli = parser()
        # Bash completion (`eval "$(register-python-argcomplete lab)"`): answers and exits when the shell asks.
        argcomplete.autocomplete(cli)
        args = cli.parse_args(argv)
        sys.exit(args.func(args))
    except (ScenarioError, InstallError, NamespaceError, EvidenceError) as exc:
        err.print(_error_text(exc), highlight=False)
        sys.exit(2)
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        err.print(f"{'terminated' if terminated else 'interrupted'}; what it built was taken down")
        sys.exit(143 if terminated else 130)
