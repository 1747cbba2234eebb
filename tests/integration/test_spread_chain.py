"""A probe's spread (lab/probe/choices.py, SpreadReader) reads only the chain that drew among endpoints
(`iptables -S CHAIN`), not the node's whole nat table: some 3 MB at 10 000 endpoints, listed again on each node a
probe enters. Its lines must be the ones iptables-save prints for that chain, on both backends, with kube-proxy's
comments, draws and ClientIP affinity."""

from __future__ import annotations

import subprocess

import pytest

from lab.probe.choices import SpreadReader, jump_choices
from lab.realize.enter import create_netns_all
from lab.realize.runs import new_prefix, record, release, remove_namespaces

SVC = "KUBE-SVC-LOLE4ISW44XBNF3G"
WEB = '-m comment --comment "default/web cluster IP"'
AFFINITY = "-m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-AAA --mask 255.255.255.255 --rsource"
DRAW = "-m statistic --mode random --probability"
NAT = "\n".join(
    [
        "*nat",
        *(f":{chain} - [0:0]" for chain in ("KUBE-SERVICES", SVC, "KUBE-SVC-OTHER", "KUBE-MARK-MASQ")),
        *(f":KUBE-SEP-{name} - [0:0]" for name in ("AAA", "BBB", "CCC")),
        f"-A KUBE-SERVICES -d 172.30.0.10/32 -p tcp {WEB} -m tcp --dport 80 -j {SVC}",
        f"-A {SVC} ! -s 10.0.0.0/8 -d 172.30.0.10/32 -p tcp {WEB} -m tcp --dport 80 -j KUBE-MARK-MASQ",
        f'-A {SVC} -m comment --comment "default/web -> 10.0.0.2:8080" {AFFINITY} -j KUBE-SEP-AAA',
        f'-A {SVC} -m comment --comment "default/web -> 10.0.0.2:8080" {DRAW} 0.33333333349 -j KUBE-SEP-AAA',
        f'-A {SVC} -m comment --comment "default/web -> 10.0.0.3:8080" {DRAW} 0.50000000000 -j KUBE-SEP-BBB',
        f'-A {SVC} -m comment --comment "default/web -> 10.0.0.4:8080" -j KUBE-SEP-CCC',
        '-A KUBE-SVC-OTHER -m comment --comment "default/other -> 10.0.0.9:8080" -j KUBE-SEP-AAA',
        "COMMIT",
        "",
    ]
)


@pytest.fixture
def namespace(host_unchanged):
    prefix = new_prefix()
    names = [f"{prefix}-node"]
    record(prefix, *names)
    try:
        create_netns_all(names, lambda: None)
        yield names[0]
    finally:
        remove_namespaces(names)
        release(prefix)


@pytest.mark.parametrize("backend", ["nft", "legacy"])
def test_the_chain_alone_lists_what_the_table_save_does_for_it(namespace, backend):
    def run(*argv: str, text: str | None = None) -> str:
        done = subprocess.run(["ip", "netns", "exec", namespace, *argv], input=text, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    run(f"iptables-{backend}-restore", text=NAT)
    saved = run(f"iptables-{backend}-save", "-t", "nat")
    chain = SpreadReader({"node": namespace}, "iptables", backend)._chain_rules("node", "IPv4", SVC)
    mine = [line for line in saved.splitlines() if line.startswith(f"-A {SVC} ")]
    assert [line for line in chain.splitlines() if line.startswith("-A ")] == mine
    assert jump_choices(chain, SVC) == jump_choices(saved, SVC) == {"KUBE-SEP-AAA", "KUBE-SEP-BBB", "KUBE-SEP-CCC"}
