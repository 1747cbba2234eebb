"""`lab import`'s arguments, and the command: read the inputs, write the scenario, check it as `lab validate`
would, say what was left out. A runner beside lab/cli.py: the import itself is describe's front end
(lab/describe/kubectl/), which knows nothing of command lines."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.describe.errors import ScenarioError, ScenarioErrors, raise_all
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.origins import located
from lab.describe.kubectl.scenario import Imported, Options, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.describe.load import load_scenario
from lab.describe.names import DNS1123_LABEL, refusal
from lab.describe.resolve.network import MAX_NODES
from lab.describe.resolve.workload import MAX_PODS
from lab.helptext import exit_codes

DESCRIPTION = (
    "Write a scenario file from a cluster's own objects: the nodes (addresses, podCIDRs, topology labels), the "
    "Services asked for with the EndpointSlices kube-proxy read (ready, serving, terminating, nodeName, hints) and "
    "the pods at their endpoints, kube-proxy's mode, release and options, an external host, and a probe per "
    "frontend and node probed (the cluster IP from a pod on each, the NodePort through each, each external and "
    "load balancer IP, from inside and outside loadBalancerSourceRanges; the nodes probed are one of each kind the "
    "Service's rules tell apart: with its endpoints or without, by zone), each with `expect: observe`: it records "
    "what the kernel did and passes, for you to write what it should do. Each input file is recognised by what it "
    "holds: `kubectl get nodes,pods,services,endpointslices -A -o yaml` (or -o json), `kubectl -n kube-system get "
    "configmap kube-proxy -o yaml`, `kubectl version -o yaml`, `kubectl get servicecidrs -o yaml` (the Service "
    "ranges nftables kube-proxy drops unallocated addresses of), `kubectl get ippools.crd.projectcalico.org -o "
    "yaml` (Calico's pools: their natOutgoing), MetalLB's `kubectl get "
    "ipaddresspools,l2advertisements,bgpadvertisements -A -o yaml` and kube-vip's DaemonSet (who announces a load "
    "balancer address in the nodes' network: a layer 2 load balancer, or BGP routes; without them such an address "
    "is taken to be MetalLB's layer 2, said); `-` reads standard input. Services kube-proxy "
    "ignores (headless, ExternalName, labelled service.kubernetes.io/service-proxy-name) are skipped, and "
    "everything the lab leaves out or changes (IPv6, fields it does not model, a CNI it builds otherwise, an "
    "endpoint no pod of the input answers), what it did with a node's state (NotReady, cordoned, tainted, excluded "
    "from load balancers), where the release came from and why a node was renamed are said on standard error, one "
    "line each with file, line, object and field. Over the lab's 100 nodes the import is sliced: the nodes the "
    "first Service's probes cross (or --nodes) are built with kube-proxy's rules for the whole cluster, every other "
    "node is a stand-in whose pods are its endpoints' addresses, and the Services probed through built nodes alone "
    "are probed. The scenario is checked as lab validate checks it before it is written. See docs/import.md."
)


def add_import_command(sub: argparse._SubParsersAction, func: Callable[[argparse.Namespace], int]) -> None:
    p = sub.add_parser(
        "import",
        help="write a scenario from kubectl's objects (kubectl get ... -o yaml, kube-proxy's ConfigMap)",
        description=DESCRIPTION,
        epilog=exit_codes(
            (0, "written (notes on standard error say what was left out)"),
            (2, "an input the import cannot read (file:line: object: field: what was expected), a bad flag"),
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="kubectl output (YAML or JSON); - for standard input")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the scenario to FILE, whole or not at all (default: standard output)",
    )
    p.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="NS/NAME",
        help="import this Service (repeatable; default: every one), with only the nodes and pods it involves",
    )
    p.add_argument(
        "--nodes",
        metavar="NODE,...",
        help=f"build these nodes (at most {MAX_NODES}) and write every other as a stand-in (standIn: true); default: "
        f"over {MAX_NODES} nodes, those the first Service's probes cross (docs/import.md, Sliced imports)",
    )
    p.add_argument(
        "--kube-version",
        metavar="1.MINOR",
        help="kube-proxy's release (default: kubectl version's server, else the nodes' kubeProxyVersion)",
    )
    p.add_argument(
        "--anonymize",
        action="store_true",
        help="rename namespaces, Services, pods, nodes and zones, and move every address, consistently "
        "(for a repro posted in public)",
    )
    p.add_argument("--name", default="imported", help="the scenario's name, a DNS-1123 label (imported)")
    p.set_defaults(func=func)


def run_import(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    if why := refusal(DNS1123_LABEL, "--name", args.name):
        raise ScenarioError("lab import", None, "--name", why)
    if args.files.count("-") > 1:
        raise ScenarioError("lab import", None, "", "standard input (-) can be given once")
    for asked in args.service:
        if asked.count("/") != 1:
            raise ScenarioError("lab import", None, "--service", f"expected NAMESPACE/NAME, got {asked!r}")
    nodes = args.nodes.split(",") if args.nodes is not None else []
    if "" in nodes:  # unsaid, `--nodes ""` built the default choice and `--nodes a,,b` passed over the gap
        raise ScenarioError(
            "lab import", None, "--nodes", f"expected node names separated by commas, got {args.nodes!r}"
        )
    options = Options(args.service, args.kube_version, args.anonymize, args.name, nodes)
    imported = import_cluster(read_inputs(args.files), options)
    _bounded(imported.scenario)
    text = scenario_text(imported.scenario)
    _check(text, imported)
    for line in imported.notes:
        say(line)
    if args.output:
        write_output(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0


def _bounded(scenario: dict[str, Any]) -> None:
    """Refuse, before it is written, a scenario larger than the lab builds (lab validate would refuse it, after
    minutes of writing and reading it back at a cluster of tens of thousands of pods)."""
    nodes = sum(1 for n in scenario["nodes"] if not n.get("standIn"))  # a stand-in is not built
    pods = sum(1 for m in scenario["workload"] if m.get("kind") == "Pod")
    for count, most, what in ((nodes, MAX_NODES, "nodes"), (pods, MAX_PODS, "pods")):
        if count > most:
            raise ScenarioError(
                "lab import",
                None,
                "",
                f"at most {most} {what} in a scenario (docs/scenarios.md): these objects ask for {count}; "
                "--service NAMESPACE/NAME imports the Services asked for, with only the nodes and pods they involve",
            )


def _check(text: str, imported: Imported) -> None:
    """Refuse to write what lab validate would refuse, each error said at the input the refused part came from;
    one of no input's is lab import's own (please report it), said without the temporary file's name or lines."""
    fd, path = tempfile.mkstemp(prefix="lab-import-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        load_scenario(path)
    except ScenarioError as exc:
        raise_all([_said_at_input(e, imported) for e in (exc.errors if isinstance(exc, ScenarioErrors) else [exc])])
    finally:
        os.unlink(path)


def _said_at_input(error: ScenarioError, imported: Imported) -> ScenarioError:
    if (found := located(error, imported.origins, imported.scenario)) is not None:
        return found
    said = f"{error.field}: {error.message}" if error.field else error.message
    return ScenarioError(
        "lab import", None, "", f"the scenario written would not pass lab validate: {said} (please report it)"
    )


def write_output(target: Path, text: str) -> None:
    """Write the scenario whole or not at all: a temporary file beside the target, renamed over it once written
    and flushed; a failure (no such directory, a full disk) leaves nothing and is said in words. Only a regular
    file is replaced: a directory, a device or a pipe is refused (standard output is the default)."""
    what = f"-o {target}"
    try:
        if target.exists() and not target.is_file():
            raise ScenarioError("lab import", None, what, "not a regular file: give a file's path, or leave -o out")
        if not target.parent.is_dir():
            raise ScenarioError("lab import", None, what, f"{target.parent}: no such directory")
        fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    except OSError as exc:
        raise ScenarioError("lab import", None, what, f"cannot write there: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(partial, 0o666 & ~_umask())
        os.replace(partial, target)
    except OSError as exc:
        Path(partial).unlink(missing_ok=True)
        raise ScenarioError("lab import", None, what, f"not written: {exc.strerror or exc}") from None


def _umask() -> int:
    """The process's umask (read by setting it, then set back): the scenario's mode is a file's the user makes."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
