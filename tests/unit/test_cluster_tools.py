"""cluster.tools: which Debian release's nft kube-proxy (its image) and the node's other writer (the host, a CNI)
run; what the loader takes and refuses in words, and the commands install and the probes then run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.describe.resolve.restore_text import table_sections, tables_named
from lab.install.host_rules import HostRules
from lab.install.tools import InstallError, reading_nft, tool_command, xtables

NFTABLES = BASE.replace("cluster: {", "cluster: {proxyMode: nftables, ")


def _with_tools(base: str, tools: str) -> str:
    return base.replace("cluster: {", "cluster: {tools: " + tools + ", ", 1)


def test_the_releases_and_the_host_script_are_taken(tmp_path: Path) -> None:
    text = _with_tools(NFTABLES, '{kubeProxy: {nft: bookworm}, host: {nft: trixie, nftables: "add table ip x\\n"}}')
    cluster = load_scenario(write(tmp_path, text)).variants[0].cluster
    assert cluster.tools == (("kubeProxy", "nft", "bookworm"), ("host", "nft", "trixie"))
    assert cluster.host_nftables == "add table ip x\n"


def test_no_tools_is_this_machines_nft(tmp_path: Path) -> None:
    topo = load_scenario(write(tmp_path, NFTABLES)).variants[0]
    assert topo.cluster.tools == ()
    assert tool_command(topo, "kubeProxy", "nft") == ("nft",)
    assert reading_nft(topo) == ("nft",)


@pytest.mark.parametrize("release", ["buster", "sid", "1.0.6", "Trixie"])
def test_an_unknown_release_is_refused_in_words(tmp_path: Path, release: str) -> None:
    error = str(error_for(tmp_path, _with_tools(NFTABLES, f"{{kubeProxy: {{nft: {release}}}}}")))
    assert "cluster.tools.kubeProxy.nft" in error
    assert "bullseye" in error and "trixie" in error


def test_an_unknown_tool_or_role_is_refused(tmp_path: Path) -> None:
    assert "cluster.tools.kubeProxy.nftables" in str(
        error_for(tmp_path, _with_tools(NFTABLES, "{kubeProxy: {nftables: x}}"))
    )
    assert "cluster.tools.cni" in str(error_for(tmp_path, _with_tools(NFTABLES, "{cni: {nft: trixie}}")))


def test_kube_proxys_nft_outside_nftables_mode_is_refused(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _with_tools(BASE, "{kubeProxy: {nft: bookworm}}")))
    assert "kube-proxy runs nft only in proxyMode nftables, not iptables" in error


def test_install_runs_each_writers_fetched_command_and_the_lab_reads_with_the_newest(tmp_path: Path) -> None:
    text = _with_tools(NFTABLES, "{kubeProxy: {nft: bookworm}, host: {nft: trixie}}")
    topo = load_scenario(write(tmp_path, text)).variants[0]
    old, new = ("/b/ld.so", "/b/nft"), ("/t/ld.so", "/t/nft")
    fetched = dataclasses.replace(topo, tool_commands=(("kubeProxy", "nft", old), ("host", "nft", new)))
    assert tool_command(fetched, "kubeProxy", "nft") == old
    assert tool_command(fetched, "host", "nft") == new
    assert reading_nft(fetched) == new
    with pytest.raises(InstallError, match="names kubeProxy's nft release, but the runner did not fetch it"):
        tool_command(topo, "kubeProxy", "nft")


def test_iptables_releases_are_named_by_the_backend_each_writer_writes_in(tmp_path: Path) -> None:
    text = _with_tools(BASE, "{kubeProxy: {iptables: bookworm}, host: {iptables: bullseye, iptablesBackend: legacy}}")
    cluster = load_scenario(write(tmp_path, text)).variants[0].cluster
    assert cluster.tools == (("kubeProxy", "iptables-nft", "bookworm"), ("host", "iptables-legacy", "bullseye"))
    assert cluster.host_iptables_backend == "legacy"


def test_the_hosts_backend_is_kube_proxys_unless_given(tmp_path: Path) -> None:
    text = _with_tools(BASE.replace("cluster: {", "cluster: {iptablesBackend: legacy, "), "{host: {iptables: trixie}}")
    cluster = load_scenario(write(tmp_path, text)).variants[0].cluster
    assert cluster.tools == (("host", "iptables-legacy", "trixie"),)
    assert cluster.host_iptables_backend == "legacy"


@pytest.mark.parametrize("release", ["buster", "1.8.9", "Bookworm"])
def test_an_unknown_iptables_release_is_refused_in_words(tmp_path: Path, release: str) -> None:
    error = str(error_for(tmp_path, _with_tools(BASE, f"{{host: {{iptables: {release}}}}}")))
    assert "cluster.tools.host.iptables" in error
    assert "bullseye" in error and "trixie" in error


@pytest.mark.parametrize("backend", ["nftables", "iptables-legacy", "true"])
def test_an_unknown_host_backend_is_refused_in_words(tmp_path: Path, backend: str) -> None:
    error = str(error_for(tmp_path, _with_tools(BASE, f"{{host: {{iptablesBackend: {backend}}}}}")))
    assert "cluster.tools.host.iptablesBackend" in error
    assert "'nft'" in error and "'legacy'" in error


def test_host_rules_that_are_not_text_are_refused(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _with_tools(BASE, "{host: {iptablesRules: [a]}}")))
    assert "cluster.tools.host.iptablesRules: expected text, not a list" in error


def test_kube_proxys_iptables_in_nftables_mode_is_refused(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _with_tools(NFTABLES, "{kubeProxy: {iptables: bookworm}}")))
    assert "cluster.tools.kubeProxy.iptables" in error
    assert "kube-proxy runs iptables only in proxyMode iptables or ipvs, not nftables" in error


@pytest.mark.parametrize(
    ("rules", "said"),
    [
        ("-A FORWARD -j DROP\\n", "its line 1 ('-A FORWARD -j DROP'): outside a table: expected *filter"),
        ("*filters\\nCOMMIT\\n", "its line 1 ('*filters'): no table iptables knows: expected one of *filter, *nat"),
        ("*filter\\n:FORWARD DROP [0:0]\\n", "table filter is not closed: COMMIT expected after its last line"),
        ("*filter\\n*nat\\nCOMMIT\\n", "its line 2 ('*nat'): table filter is not closed: COMMIT expected before"),
        ("*filter\\n:FORWARD REJECT\\nCOMMIT\\n", "FORWARD is a built-in chain of filter: its policy is ACCEPT, DROP"),
        ("*nat\\n:FORWARD DROP\\nCOMMIT\\n", "FORWARD is no built-in chain of nat (PREROUTING, INPUT, OUTPUT, POST"),
        ("*filter\\n:DOCKER DROP\\nCOMMIT\\n", "DOCKER is no built-in chain of filter (INPUT, FORWARD, OUTPUT)"),
        ("*filter\\n:FORWARD\\nCOMMIT\\n", "a chain is declared as :NAME POLICY, optionally followed by [packets"),
        ("*filter\\niptables -P FORWARD DROP\\nCOMMIT\\n", "expected a chain (:NAME POLICY), a rule (-A CHAIN ...)"),
        ("*filter\\n[0:0]\\nCOMMIT\\n", "its line 2 ('[0:0]'): expected a chain (:NAME POLICY), a rule (-A CHAIN"),
        ("*filter\\n[0] -A INPUT -j DROP\\nCOMMIT\\n", "its line 2 ('[0] -A INPUT -j DROP'): expected a chain"),
        ("# only a comment\\n", "no table: expected *filter, *nat, *mangle, *raw or *security"),
    ],
)
def test_host_rules_that_are_not_restore_input_are_refused_at_their_line(tmp_path: Path, rules: str, said: str) -> None:
    error = str(error_for(tmp_path, _with_tools(BASE, f'{{host: {{iptablesRules: "{rules}"}}}}')))
    assert "cluster.tools.host.iptablesRules" in error and "not iptables-restore's input" in error
    assert said in error


def test_host_rules_as_restore_takes_them_are_taken(tmp_path: Path) -> None:
    rules = (
        "# Docker\\n*filter\\n:FORWARD DROP [0:0]\\n:DOCKER - [0:0]\\n-A FORWARD -j DOCKER\\nCOMMIT\\n*nat\\nCOMMIT\\n"
    )
    cluster = load_scenario(write(tmp_path, _with_tools(BASE, f'{{host: {{iptablesRules: "{rules}"}}}}'))).variants[0]
    assert cluster.cluster.host_iptables_rules.startswith("# Docker\n*filter\n:FORWARD DROP [0:0]\n")


def test_host_rules_with_the_counters_iptables_save_c_writes_are_taken(tmp_path: Path) -> None:
    """`iptables-save -c`'s output, as a node's rules are often kept: iptables-restore reads each rule's
    [packets:bytes] and, without -c, sets them aside."""
    rules = "*filter\\n:FORWARD DROP [12:720]\\n[3:180] -A FORWARD -i docker0 -j ACCEPT\\nCOMMIT\\n"
    topo = load_scenario(write(tmp_path, _with_tools(BASE, f'{{host: {{iptablesRules: "{rules}"}}}}'))).variants[0]
    assert "[3:180] -A FORWARD -i docker0 -j ACCEPT\n" in topo.cluster.host_iptables_rules


def test_each_writer_runs_its_own_iptables(tmp_path: Path) -> None:
    text = _with_tools(BASE, "{kubeProxy: {iptables: bookworm}, host: {iptables: bullseye, iptablesBackend: legacy}}")
    topo = load_scenario(write(tmp_path, text)).variants[0]
    kube_proxy, host = ("env", "/b/ld.so", "/b/xtables-nft-multi"), ("env", "/o/ld.so", "/o/xtables-legacy-multi")
    commands = (("kubeProxy", "iptables-nft", kube_proxy), ("host", "iptables-legacy", host))
    fetched = dataclasses.replace(topo, tool_commands=commands)
    assert xtables(fetched, "kubeProxy").argv("restore") == [*kube_proxy, "iptables-nft-restore"]
    assert xtables(fetched, "host").argv("save", "IPv6") == [*host, "ip6tables-legacy-save"]
    with pytest.raises(InstallError, match="names kubeProxy's iptables-nft release, but the runner did not fetch it"):
        xtables(topo, "kubeProxy")
    plain = load_scenario(write(tmp_path, BASE)).variants[0]
    assert xtables(plain, "host").argv("iptables") == ["iptables-nft"]  # this machine's, in kube-proxy's backend


def test_the_host_rules_of_the_tables_kube_proxys_restore_replaced() -> None:
    rules = "# Docker\n*filter\n:FORWARD DROP [0:0]\nCOMMIT\n*raw\n-A PREROUTING -j NOTRACK\nCOMMIT\n"
    assert tables_named(rules) == {"filter", "raw"}
    assert table_sections(rules, {"filter", "nat"}) == "*filter\n:FORWARD DROP [0:0]\nCOMMIT\n"
    assert table_sections(rules, {"nat"}) == ""


@pytest.mark.parametrize(
    ("base", "host", "shared"),
    [
        (BASE, "iptablesBackend: nft, ", True),
        (BASE, "iptablesBackend: legacy, ", False),
        (BASE.replace("cluster: {", "cluster: {iptablesBackend: legacy, "), "", True),
        (NFTABLES, "iptablesBackend: nft, ", False),  # kube-proxy's nftables table is its own
    ],
)
def test_the_host_rules_are_added_again_only_where_kube_proxys_restore_replaced_them(
    tmp_path: Path, base: str, host: str, shared: bool
) -> None:
    text = _with_tools(base, f'{{host: {{{host}iptablesRules: "*filter\\nCOMMIT\\n"}}}}')
    assert HostRules.of(load_scenario(write(tmp_path, text)).variants[0]).shared == shared
