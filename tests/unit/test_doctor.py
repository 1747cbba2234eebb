"""doctor: kernel config parsing and the verdicts it leads to (no root needed)."""

from __future__ import annotations

import subprocess

import pytest
from rich.table import Table

from lab import doctor
from lab.doctor import (
    ABSENT,
    BUILTIN,
    MODULE,
    MODULE_MISSING,
    UNKNOWN,
    VM_HINT,
    Attempts,
    Check,
    Feature,
    Kernel,
    attempt_script,
    combine_trace,
    format_checks,
    judge,
    module_name,
    parse_attempts,
    parse_kernel_config,
)

CONFIG = """\
#
# Automatically generated file; DO NOT EDIT.
# Linux/x86 6.1.0 Kernel Configuration
#
CONFIG_CC_VERSION_TEXT="gcc (Debian 12.2.0-14) 12.2.0"
CONFIG_NET_NS=y
CONFIG_VETH=m
CONFIG_BRIDGE=m
CONFIG_BRIDGE_NETFILTER=m
CONFIG_DUMMY=m
# CONFIG_IP_VS is not set
CONFIG_IP_SET_MAX=256

CONFIG_VXLAN=m
"""

TOOLS = {"ip": "/usr/sbin/ip", "nft": "/usr/sbin/nft", "conntrack": None}


@pytest.fixture(autouse=True)
def _not_in_a_vm(monkeypatch):
    # Inside `lab vm` doctor may try every module; these tests are about a real host.
    monkeypatch.delenv("LAB_VM", raising=False)


def kernel(config: str | None = CONFIG, release: str = "6.1.0-18-amd64", **modules: frozenset[str]) -> Kernel:
    parsed = parse_kernel_config(config) if config is not None else None
    return Kernel(release=release, config=parsed, config_source="fake", **modules)


def test_parse_kernel_config_reads_values_and_unset_options():
    config = parse_kernel_config(CONFIG)
    assert config["CONFIG_NET_NS"] == "y"
    assert config["CONFIG_VETH"] == "m"
    assert config["CONFIG_IP_VS"] == "n"
    assert config["CONFIG_IP_SET_MAX"] == "256"
    assert config["CONFIG_CC_VERSION_TEXT"] == "gcc (Debian 12.2.0-14) 12.2.0"
    assert not any(key.startswith("#") for key in config), "comments are not options"


def test_module_names_from_module_paths():
    assert module_name("kernel/net/netfilter/ipvs/ip_vs.ko.xz") == "ip_vs"
    assert module_name("kernel/net/bridge/br_netfilter.ko") == "br_netfilter"
    assert module_name("kernel/drivers/net/foo-bar.ko.zst") == "foo_bar"


def test_option_states_from_config_and_module_files():
    k = kernel(available=frozenset({"veth", "bridge"}), loaded=frozenset({"vxlan"}))
    assert k.state("CONFIG_NET_NS") == BUILTIN
    assert k.state("CONFIG_IP_SET_MAX") == BUILTIN  # a value other than y/m/n means "there"
    assert k.state("CONFIG_VETH") == MODULE  # =m and its file is in /lib/modules
    assert k.state("CONFIG_VXLAN") == MODULE  # =m and already loaded
    assert k.state("CONFIG_DUMMY") == MODULE_MISSING  # =m but no file: modules not installed
    assert k.state("CONFIG_IP_VS") == ABSENT  # "is not set"
    assert k.state("CONFIG_NET_IPIP") == ABSENT  # not in the config at all
    assert k.is_active("CONFIG_NET_NS") and k.is_active("CONFIG_VXLAN")
    assert not k.is_active("CONFIG_VETH")


def test_option_states_without_a_config_fall_back_to_module_lists():
    k = kernel(None, builtin=frozenset({"veth"}), available=frozenset({"bridge"}))
    assert k.state("CONFIG_VETH") == BUILTIN
    assert k.state("CONFIG_BRIDGE") == MODULE
    assert k.state("CONFIG_VXLAN") == UNKNOWN
    assert k.state("CONFIG_NET_NS") == UNKNOWN  # bool options have no module to look for


def test_version_from_release():
    assert kernel(release="6.1.0-18-amd64").version == (6, 1)
    assert kernel(release="5.10.0-28-cloud-amd64").version == (5, 10)
    assert kernel(release="weird").version == (0, 0)


def test_absent_option_says_which_and_points_to_a_vm():
    check = judge(Feature("ip_vs", ("CONFIG_IP_VS",)), kernel(), TOOLS, Attempts())
    assert not check.present
    assert "CONFIG_IP_VS" in check.detail
    assert "CONFIG_IP_VS" in check.how_to_get and VM_HINT in check.how_to_get


def test_module_without_file_asks_for_the_kernel_modules():
    check = judge(Feature("dummy", ("CONFIG_DUMMY",)), kernel(), TOOLS, Attempts())
    assert not check.present
    assert "dummy" in check.detail
    assert "linux-image-6.1.0-18-amd64" in check.how_to_get


def test_feature_that_is_its_tool_needs_the_tool():
    feature = Feature("conntrack", ("CONFIG_NET_NS",), "{0} -L", ("conntrack",), needs_tools=True)
    check = judge(feature, kernel(), TOOLS, Attempts())
    assert not check.present
    assert check.how_to_get == "apt-get install conntrack"


def test_module_nothing_autoloads_must_be_loaded():
    feature = Feature("br_netfilter", ("CONFIG_BRIDGE_NETFILTER",), needs_loaded=True, how="modprobe br_netfilter")
    available = frozenset({"br_netfilter"})
    assert judge(feature, kernel(available=available), TOOLS, Attempts()).how_to_get == "modprobe br_netfilter"
    loaded = kernel(available=available, loaded=available)
    assert judge(feature, loaded, TOOLS, Attempts()).present


def test_attempt_outcome_decides_over_the_config():
    feature = Feature("veth", ("CONFIG_NET_NS",), "{0} link add a type veth", ("ip",))
    worked = Attempts(results={"veth": (True, "")})
    failed = Attempts(results={"veth": (False, "Error: Unknown device type.")})
    assert judge(feature, kernel(), TOOLS, worked).present
    check = judge(feature, kernel(), TOOLS, failed)
    assert not check.present and "Unknown device type" in check.detail


def test_untried_feature_is_judged_by_config_and_says_why():
    feature = Feature("veth", ("CONFIG_NET_NS",), "{0} link add a type veth", ("ip",))
    check = judge(feature, kernel(), TOOLS, Attempts(not_tried={"veth": "needs root"}))
    assert check.present and "not tried: needs root" in check.detail
    unknown = judge(feature, kernel(None), TOOLS, Attempts(not_tried={"veth": "needs root"}))
    assert not unknown.present and "as root" in unknown.how_to_get


@pytest.mark.parametrize(
    ("config", "release", "loaded", "tried"),
    [
        ("CONFIG_DUMMY=y", "6.1.0", frozenset(), True),  # built in: trying loads nothing
        ("CONFIG_DUMMY=m", "6.1.0", frozenset({"dummy"}), True),  # already loaded: dummy0 exists anyway
        ("CONFIG_DUMMY=m", "6.1.0", frozenset(), False),  # loading it would create dummy0 on the host
    ],
)
def test_never_autoloads_a_module_that_changes_the_host(config, release, loaded, tried):
    dummy = next(f for f in doctor.FEATURES if f.name == "dummy")
    k = kernel(config, release, loaded=loaded, available=frozenset({"dummy"}))
    reason = doctor._why_not_try(dummy, k, TOOLS, root=True)
    assert (reason == "") is tried
    if not tried:
        assert "dummy0" in reason


def test_netfilter_modules_are_autoloaded_only_from_5_15():
    ipset = next(f for f in doctor.FEATURES if f.name == "ipset")
    config = "CONFIG_IP_SET=m\nCONFIG_IP_SET_HASH_IP=m\n"
    available = frozenset({"ip_set", "ip_set_hash_ip"})
    tools = {"ipset": "/usr/sbin/ipset"}
    assert doctor._why_not_try(ipset, kernel(config, "6.1.0", available=available), tools, root=True) == ""
    old = doctor._why_not_try(ipset, kernel(config, "5.10.0", available=available), tools, root=True)
    assert "5.15" in old
    assert doctor._why_not_try(ipset, kernel(config, "6.1.0", available=available), tools, root=False) == "needs root"


def test_attempt_script_reports_each_snippet_status_and_last_words():
    script = attempt_script({"good": "echo fine", "bad": "echo first >&2; echo 'Error: nope' >&2; exit 3"})
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    results = parse_attempts(out)
    assert results["good"] == (True, "fine")
    assert results["bad"][0] is False
    assert "Error: nope" in results["bad"][1]


def test_trace_is_present_when_either_way_works():
    xt = Check("xt TRACE", False, "CONFIG_NETFILTER_XT_TARGET_TRACE not set", "kernel built without it")
    nft = Check("nftrace", True, "works", "")
    assert combine_trace([xt, nft]).present
    missing = combine_trace([xt, Check("nftrace", False, "no", "apt-get install nftables")])
    assert not missing.present and "apt-get install nftables" in missing.how_to_get


def test_format_checks_has_a_row_per_check():
    checks = [Check("netns", True, "built in", ""), Check("ip", False, "not found", "apt-get install iproute2", "tool")]
    table = format_checks(checks)
    assert isinstance(table, Table)
    assert table.row_count == 2


def test_kernel_has_rejects_unknown_features():
    with pytest.raises(ValueError, match="unknown kernel feature"):
        doctor.kernel_has("no-such-feature")
