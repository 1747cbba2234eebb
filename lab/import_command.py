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

from lab.describe.errors import ScenarioError
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.scenario import Options, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.describe.load import load_scenario
from lab.describe.names import DNS1123_LABEL, refusal
from lab.helptext import exit_codes

DESCRIPTION = (
    "Write a scenario file from a cluster's own objects: the nodes (addresses, podCIDRs, topology labels), the "
    "Services asked for with the EndpointSlices kube-proxy read (ready, serving, terminating, nodeName, hints) and "
    "the pods at their endpoints, kube-proxy's mode, release and options, an external host, and a probe per "
    "frontend and node (the cluster IP from a pod on each node, the NodePort through each node, each external and "
    "load balancer IP, from inside and outside loadBalancerSourceRanges), each with `expect: observe`: it records "
    "what the kernel did and passes, for you to write what it should do. Each input file is recognised by what it "
    "holds: `kubectl get nodes,pods,services,endpointslices -A -o yaml` (or -o json), `kubectl -n kube-system get "
    "configmap kube-proxy -o yaml`, `kubectl version -o yaml`; `-` reads standard input. Services kube-proxy "
    "ignores (headless, ExternalName, labelled service.kubernetes.io/service-proxy-name) are skipped, and "
    "everything the lab leaves out or changes (IPv6, fields it does not model, a CNI it builds otherwise, an "
    "endpoint no pod of the input answers) is said on standard error, one line each with file, line, object and "
    "field. The scenario is checked as lab validate checks it before it is written. See docs/import.md."
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
    p.add_argument("-o", "--output", metavar="FILE", help="write the scenario to FILE (default: standard output)")
    p.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="NS/NAME",
        help="import this Service (repeatable; default: every one), with only the nodes and pods it involves",
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
    options = Options(args.service, args.kube_version, args.anonymize, args.name)
    imported = import_cluster(read_inputs(args.files), options)
    text = scenario_text(imported.scenario)
    _check(text)
    for line in imported.notes:
        say(line)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _check(text: str) -> None:
    """Refuse to write what lab validate would refuse: that is lab import's error, said as such."""
    fd, path = tempfile.mkstemp(prefix="lab-import-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        load_scenario(path)
    except ScenarioError as exc:
        raise ScenarioError(
            "lab import", None, "", f"the scenario written would not pass lab validate (please report it): {exc}"
        ) from None
    finally:
        os.unlink(path)
