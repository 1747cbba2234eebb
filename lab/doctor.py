"""doctor: which kernel features and tools the harness can use on this machine, and how to get the rest.

A kernel feature is decided by the truth, not by guesses from the distribution: the kernel's own config
(/proc/config.gz, else /boot/config-<release>) says whether it was built in (=y) or as a module (=m), and a
module counts only if it is loaded or its file is in /lib/modules/<release>. Where it is cheap, doctor then
proves the feature by using it inside a throwaway network namespace (`unshare -n`), all attempts in one
shell, so nothing is created in the host's namespace and the namespace vanishes with the shell.

An attempt may make the kernel load a module. Doctor never lets that happen where loading the module by
itself changes the host: dummy (creates dummy0), ipip (creates tunl0), br_netfilter (sends the host's bridged
traffic through iptables), and netfilter modules before 5.15 (iptable_filter instantiated its table in the
host's namespace on load). Those are judged from the config and the module files only, and say so.
"""

from __future__ import annotations

import functools
import gzip
import os
import platform
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table

VM_HINT = "run under a stock Debian kernel with `lab vm run -- ...`"

# Root's tools live in sbin, which a sudo'ed or non-root PATH may lack.
_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
)

# The user-space tools the harness runs, and the Debian package that brings each.
TOOLS: dict[str, str] = {
    "ip": "iproute2",
    "iptables-restore": "iptables",
    "ipset": "ipset",
    "nft": "nftables",
    "ipvsadm": "ipvsadm",
    "conntrack": "conntrack",
    "tcpdump": "tcpdump",
    "qemu-system-x86_64": "qemu-system-x86",
}
# Tools doctor itself needs for its attempts, beyond TOOLS.
_HELPERS: dict[str, str] = {
    "unshare": "util-linux",
    "iptables-legacy-restore": "iptables",
    "iptables-nft-restore": "iptables",
}
_PACKAGES = TOOLS | _HELPERS

# The module that provides each CONFIG option doctor asks about (an option without one is bool: y or n).
_MODULES: dict[str, str] = {
    "CONFIG_VETH": "veth",
    "CONFIG_BRIDGE": "bridge",
    "CONFIG_BRIDGE_NETFILTER": "br_netfilter",
    "CONFIG_DUMMY": "dummy",
    "CONFIG_NET_IPIP": "ipip",
    "CONFIG_VXLAN": "vxlan",
    "CONFIG_NETFILTER_XTABLES": "x_tables",
    "CONFIG_IP_NF_IPTABLES": "ip_tables",
    "CONFIG_IP_NF_FILTER": "iptable_filter",
    "CONFIG_IP_NF_NAT": "iptable_nat",
    "CONFIG_IP_NF_RAW": "iptable_raw",
    "CONFIG_NF_TABLES": "nf_tables",
    "CONFIG_NFT_COMPAT": "nft_compat",
    "CONFIG_NFT_NAT": "nft_nat",
    "CONFIG_NFT_CT": "nft_ct",
    "CONFIG_IP_SET": "ip_set",
    "CONFIG_IP_SET_HASH_IP": "ip_set_hash_ip",
    "CONFIG_IP_VS": "ip_vs",
    "CONFIG_IP_VS_RR": "ip_vs_rr",
    "CONFIG_NF_CONNTRACK": "nf_conntrack",
    "CONFIG_NF_CT_NETLINK": "nf_conntrack_netlink",
    "CONFIG_NF_NAT": "nf_nat",
    "CONFIG_NETFILTER_XT_TARGET_TRACE": "xt_TRACE",
    "CONFIG_NETFILTER_XT_MATCH_COMMENT": "xt_comment",
    "CONFIG_NETFILTER_XT_MATCH_CONNTRACK": "xt_conntrack",
    "CONFIG_NETFILTER_XT_MATCH_STATISTIC": "xt_statistic",
    "CONFIG_NETFILTER_XT_MATCH_ADDRTYPE": "xt_addrtype",
    "CONFIG_NETFILTER_XT_MATCH_RECENT": "xt_recent",
    "CONFIG_NETFILTER_XT_MARK": "xt_mark",
    "CONFIG_NETFILTER_XT_NAT": "xt_nat",
    "CONFIG_NETFILTER_XT_TARGET_MASQUERADE": "xt_MASQUERADE",
}

# What a kernel option's state can be, as far as the harness is concerned.
BUILTIN, MODULE, MODULE_MISSING, ABSENT, UNKNOWN = "y", "m", "m-missing", "n", "?"


# ---------------------------------------------------------------- the kernel: config and modules


def parse_kernel_config(text: str) -> dict[str, str]:
    """CONFIG_X -> its value ("y", "m", a number or string); "# CONFIG_X is not set" -> "n"."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if unset := re.fullmatch(r"# (CONFIG_\w+) is not set", line):
            config[unset.group(1)] = ABSENT
        elif line.startswith("CONFIG_") and "=" in line:
            key, value = line.split("=", 1)
            config[key] = value.strip('"')
    return config


def read_kernel_config(release: str) -> tuple[dict[str, str] | None, str]:
    """The running kernel's config and where it came from; (None, "") when the kernel did not ship one."""
    candidates = [Path("/proc/config.gz"), Path(f"/boot/config-{release}")]
    for path in candidates:
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        text = gzip.decompress(raw).decode() if path.suffix == ".gz" else raw.decode()
        return parse_kernel_config(text), str(path)
    return None, ""


def module_name(path: str) -> str:
    """`kernel/net/ipv4/ip_vs.ko.xz` -> `ip_vs`; modprobe treats - and _ alike, so do we."""
    base = path.rsplit("/", 1)[-1]
    return base.split(".ko", 1)[0].replace("-", "_")


def _module_names(path: Path, first_field: bool = True) -> frozenset[str]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return frozenset()
    # modules.dep: "path.ko: deps..."; modules.builtin: "path.ko"; /proc/modules: "name size ..."
    return frozenset(module_name(line.split(":", 1)[0] if first_field else line.split()[0]) for line in lines if line)


@dataclass(frozen=True)
class Kernel:
    release: str
    config: Mapping[str, str] | None
    config_source: str
    loaded: frozenset[str] = frozenset()  # /proc/modules (absent when the kernel has no module support)
    available: frozenset[str] = frozenset()  # files under /lib/modules/<release> (modules.dep)
    builtin: frozenset[str] = frozenset()  # modules.builtin: what the config would call =y

    @classmethod
    def running(cls) -> Kernel:
        release = platform.release()
        config, source = read_kernel_config(release)
        moddir = Path("/lib/modules", release)
        loaded = set(_module_names(Path("/proc/modules"), first_field=False))
        # br_netfilter registers net.bridge.* sysctls: their presence shows it is active even without /proc/modules.
        if Path("/proc/sys/net/bridge").is_dir():
            loaded.add("br_netfilter")
        return cls(
            release=release,
            config=config,
            config_source=source,
            loaded=frozenset(loaded),
            available=_module_names(moddir / "modules.dep"),
            builtin=_module_names(moddir / "modules.builtin"),
        )

    @property
    def version(self) -> tuple[int, int]:
        match = re.match(r"(\d+)\.(\d+)", self.release)
        return (int(match.group(1)), int(match.group(2))) if match else (0, 0)

    def state(self, option: str) -> str:
        """BUILTIN, MODULE (loadable or loaded), MODULE_MISSING (=m but no module file), ABSENT or UNKNOWN."""
        module = _MODULES.get(option)
        if self.config is not None:
            value = self.config.get(option, ABSENT)  # an option missing from a config had unmet dependencies
            if value == MODULE and module and not self._has_module(module):
                return MODULE_MISSING
            return value if value in (MODULE, ABSENT) else BUILTIN
        if module is None:
            return UNKNOWN
        if module in self.builtin:
            return BUILTIN
        return MODULE if self._has_module(module) else UNKNOWN

    def is_active(self, option: str) -> bool:
        """Built in or already loaded: using it loads nothing."""
        module = _MODULES.get(option)
        return self.state(option) == BUILTIN or (module is not None and module in self.loaded)

    def _has_module(self, module: str) -> bool:
        return module in self.loaded or module in self.available or module in self.builtin

    def summary(self) -> str:
        source = self.config_source or "no kernel config found"
        modules = "loads modules" if Path("/proc/modules").exists() else "no module support"
        return f"{self.release}; config: {source}; {modules}"


# ---------------------------------------------------------------- the features and how each is proved


@dataclass(frozen=True)
class Feature:
    name: str
    options: tuple[str, ...]
    attempt: str = ""  # sh run in a throwaway netns; {0}, {1}... are the paths of `tools`
    tools: tuple[str, ...] = ()
    needs_tools: bool = False  # the feature is the tool plus the kernel part: no tool, no feature
    needs_loaded: bool = False  # a module nothing loads on demand: it must already be loaded
    safe_from: tuple[int, int] | None = (0, 0)  # kernel version from which the attempt may autoload modules
    unsafe_because: str = ""
    how: str = ""  # how to get it when the kernel lacks it (default: VM_HINT)


# A cut-down kube-proxy ruleset: every match and target its iptables mode writes, so an old or
# partial kernel fails here rather than halfway through a scenario.
KUBE_RULES = """\
*filter
:LAB-FW - [0:0]
-A FORWARD -m comment --comment "lab doctor" -m conntrack --ctstate INVALID -j DROP
-A FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
*nat
:LAB-SVC - [0:0]
:LAB-MASQ - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j LAB-SVC
-A LAB-MASQ -j MARK --or-mark 0x4000
-A LAB-SVC -p tcp -m recent --name lab --rcheck --seconds 10800 --reap -j DNAT --to-destination 10.0.0.1:80
-A LAB-SVC -p tcp -m statistic --mode random --probability 0.5 -j LAB-MASQ
-A LAB-SVC -p tcp -m recent --name lab --set -j DNAT --to-destination 10.0.0.2:80
-A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully
COMMIT
"""
_XT_OPTIONS = (
    "CONFIG_NETFILTER_XTABLES",
    "CONFIG_NF_CONNTRACK",
    "CONFIG_NF_NAT",
    "CONFIG_NETFILTER_XT_MATCH_COMMENT",
    "CONFIG_NETFILTER_XT_MATCH_CONNTRACK",
    "CONFIG_NETFILTER_XT_MATCH_STATISTIC",
    "CONFIG_NETFILTER_XT_MATCH_ADDRTYPE",
    "CONFIG_NETFILTER_XT_MATCH_RECENT",
    "CONFIG_NETFILTER_XT_MARK",
    "CONFIG_NETFILTER_XT_NAT",
    "CONFIG_NETFILTER_XT_TARGET_MASQUERADE",
)
_RESTORE_KUBE_RULES = f"printf %s {shlex.quote(KUBE_RULES)} | {{0}}"
# From 5.15 on, iptables tables, conntrack and ipvs hooks come into being per namespace on first use.
_NETFILTER_SAFE_FROM = (5, 15)
_NETFILTER_UNSAFE = "loading netfilter modules before 5.15 instantiates tables in the host's namespace"
_NFT_TABLE = "{0} add table inet lab && {0} add chain inet lab pre '{{ type filter hook prerouting priority -300; }}'"

FEATURES: tuple[Feature, ...] = (
    Feature("netns", ("CONFIG_NET_NS",), attempt="true"),
    Feature("veth", ("CONFIG_VETH",), "{0} link add lab-v0 type veth peer name lab-v1", ("ip",)),
    Feature("bridge", ("CONFIG_BRIDGE",), "{0} link add lab-br0 type bridge", ("ip",)),
    Feature(
        "br_netfilter",
        ("CONFIG_BRIDGE_NETFILTER",),
        needs_loaded=True,
        how="modprobe br_netfilter (it also sends the host's bridged traffic through iptables)",
    ),
    Feature(
        "iptables-legacy",
        ("CONFIG_IP_NF_IPTABLES", "CONFIG_IP_NF_FILTER", "CONFIG_IP_NF_NAT", *_XT_OPTIONS),
        _RESTORE_KUBE_RULES,
        ("iptables-legacy-restore",),
        needs_tools=True,
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
    Feature(
        "iptables-nft",
        ("CONFIG_NF_TABLES", "CONFIG_NFT_COMPAT", "CONFIG_NFT_NAT", "CONFIG_NFT_CT", *_XT_OPTIONS),
        _RESTORE_KUBE_RULES,
        ("iptables-nft-restore",),
        needs_tools=True,
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
    Feature(
        "ipset",
        ("CONFIG_IP_SET", "CONFIG_IP_SET_HASH_IP"),
        "{0} create lab-t hash:ip && {0} add lab-t 10.0.0.1",
        ("ipset",),
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
    Feature(
        "nftables",
        ("CONFIG_NF_TABLES", "CONFIG_NFT_NAT", "CONFIG_NFT_CT"),
        _NFT_TABLE + " && {0} add rule inet lab pre ct state new counter",
        ("nft",),
        needs_tools=True,
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
    Feature(
        "ip_vs",
        ("CONFIG_IP_VS", "CONFIG_IP_VS_RR"),
        # A real server needs a route to it, even in a namespace that will never send to it.
        "ip link set lo up && ip route add 10.0.0.0/24 dev lo && "
        "{0} -A -t 10.96.0.1:80 -s rr && {0} -a -t 10.96.0.1:80 -r 10.0.0.1:80 -m",
        ("ipvsadm",),
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
    Feature(
        "dummy",
        ("CONFIG_DUMMY",),
        "{0} link add lab-d0 type dummy",
        ("ip",),
        safe_from=None,
        unsafe_because="loading the dummy module creates dummy0 in the host's namespace",
    ),
    Feature(
        "ipip",
        ("CONFIG_NET_IPIP",),
        "{0} link add lab-i0 type ipip local 192.0.2.1 remote 192.0.2.2",
        ("ip",),
        safe_from=None,
        unsafe_because="loading the ipip module creates tunl0 in the host's namespace",
    ),
    Feature("vxlan", ("CONFIG_VXLAN",), "{0} link add lab-x0 type vxlan id 42 dstport 4789", ("ip",)),
    Feature(
        "conntrack",
        ("CONFIG_NF_CONNTRACK", "CONFIG_NF_CT_NETLINK"),
        "{0} -L >/dev/null",
        ("conntrack",),
        needs_tools=True,
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
)
# "trace" is present when either way of tracing a packet through the rules works.
TRACE_PARTS: tuple[Feature, ...] = (
    Feature(
        "xt TRACE",
        ("CONFIG_IP_NF_IPTABLES", "CONFIG_IP_NF_RAW", "CONFIG_NETFILTER_XT_TARGET_TRACE"),
        "printf '*raw\\n-A PREROUTING -p tcp -j TRACE\\nCOMMIT\\n' | {0}",
        ("iptables-legacy-restore",),
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
    Feature(
        "nftrace",
        ("CONFIG_NF_TABLES",),
        _NFT_TABLE + " && {0} add rule inet lab pre meta nftrace set 1",
        ("nft",),
        safe_from=_NETFILTER_SAFE_FROM,
        unsafe_because=_NETFILTER_UNSAFE,
    ),
)


@dataclass(frozen=True)
class Check:
    name: str
    present: bool
    detail: str
    how_to_get: str
    kind: str = "kernel"  # "kernel" or "tool": the table groups by it, kernel_has() looks only at kernel checks


# ---------------------------------------------------------------- attempts in a throwaway namespace


@dataclass
class Attempts:
    """What the throwaway namespace said: per feature, (worked, last words); or why a feature was not tried."""

    results: dict[str, tuple[bool, str]] = field(default_factory=dict)
    not_tried: dict[str, str] = field(default_factory=dict)


def _kernel_lacks(feature: Feature, kernel: Kernel) -> bool:
    return any(kernel.state(o) in (ABSENT, MODULE_MISSING) for o in feature.options)


def _why_not_try(feature: Feature, kernel: Kernel, tools: Mapping[str, str | None], root: bool) -> str:
    """Empty when the attempt may run; otherwise the reason shown in the check's detail."""
    if not feature.attempt or _kernel_lacks(feature, kernel):
        return "no attempt"
    if not root:
        return "needs root"
    if missing := [t for t in feature.tools if not tools.get(t)]:
        return f"{', '.join(missing)} not installed"
    if all(kernel.is_active(o) for o in feature.options):
        return ""
    if (feature.safe_from is None or kernel.version < feature.safe_from) and not _disposable_host():
        return feature.unsafe_because
    return ""


def _disposable_host() -> bool:
    """Inside `lab vm` the "host" is a throwaway guest: loading any module there harms nothing."""
    return os.environ.get("LAB_VM") == "1"


def attempt_script(snippets: Mapping[str, str]) -> str:
    """One sh script that runs every snippet and prints `@@<name> <exit status> <last output lines>`."""
    lines = []
    for name, snippet in snippets.items():
        lines.append(f"out=$( ( {snippet} ) 2>&1 </dev/null ); rc=$?")
        lines.append(
            f'printf "@@%s %s %s\\n" {shlex.quote(name)} "$rc" "$(printf %s "$out" | tail -n 2 | tr "\\n" " ")"'
        )
    return "\n".join(lines) + "\n"


def parse_attempts(output: str) -> dict[str, tuple[bool, str]]:
    results = {}
    for line in output.splitlines():
        if match := re.fullmatch(r"@@(.+?) (\d+) ?(.*)", line):
            results[match.group(1)] = (match.group(2) == "0", match.group(3).strip())
    return results


def run_attempts(features: Iterable[Feature], kernel: Kernel, tools: Mapping[str, str | None]) -> Attempts:
    attempts = Attempts()
    root = os.geteuid() == 0
    snippets = {}
    for feature in features:
        if reason := _why_not_try(feature, kernel, tools, root):
            attempts.not_tried[feature.name] = reason
        else:
            snippets[feature.name] = feature.attempt.format(*(shlex.quote(str(tools[t])) for t in feature.tools))
    if not snippets:
        return attempts
    unshare = tools.get("unshare")
    if unshare is None:
        attempts.not_tried.update(dict.fromkeys(snippets, "unshare not installed (util-linux)"))
        return attempts
    try:
        proc = subprocess.run(
            [unshare, "-n", "sh", "-c", attempt_script(snippets)],
            capture_output=True,
            text=True,
            timeout=10,
            env={"PATH": _SEARCH_PATH, "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        attempts.not_tried.update(dict.fromkeys(snippets, "the throwaway namespace timed out"))
        return attempts
    attempts.results = parse_attempts(proc.stdout)
    if not attempts.results:  # unshare itself failed: that is the netns answer, the rest stay untried
        error = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        attempts.results["netns"] = (False, f"unshare -n failed: {error}")
        attempts.not_tried.update({n: f"unshare -n failed: {error}" for n in snippets if n != "netns"})
    return attempts


# ---------------------------------------------------------------- judging


def _describe_options(feature: Feature, kernel: Kernel) -> str:
    states = {o: kernel.state(o) for o in feature.options}
    if all(s == BUILTIN for s in states.values()):
        return "built in"
    if kernel.config is None and UNKNOWN in states.values():
        return "no kernel config to say how"
    modules = [_MODULES.get(o, o) for o, s in states.items() if s == MODULE]
    unknown = [o for o, s in states.items() if s == UNKNOWN]
    parts = [f"modules {', '.join(modules)}"] if modules else []
    return "; ".join(parts + ([f"unknown: {', '.join(unknown)}"] if unknown else []))


def judge(feature: Feature, kernel: Kernel, tools: Mapping[str, str | None], attempts: Attempts) -> Check:
    """One kernel feature's verdict: the config rules out, the attempt proves, else the config decides."""
    states = {o: kernel.state(o) for o in feature.options}
    if absent := [o for o, s in states.items() if s == ABSENT]:
        where = kernel.config_source or "the kernel config"
        return Check(feature.name, False, f"{', '.join(absent)} not set in {where}", _built_without(absent))
    if missing := [_MODULES[o] for o, s in states.items() if s == MODULE_MISSING]:
        how = f"apt-get install linux-image-{kernel.release}, or {VM_HINT}"
        return Check(feature.name, False, f"=m but not in /lib/modules/{kernel.release}: {', '.join(missing)}", how)
    if feature.needs_tools and (absent_tools := [t for t in feature.tools if not tools.get(t)]):
        how = "apt-get install " + " ".join(sorted({_PACKAGES[t] for t in absent_tools}))
        return Check(feature.name, False, f"{', '.join(absent_tools)} not installed", how)
    if feature.needs_loaded and not all(kernel.is_active(o) for o in feature.options):
        known = UNKNOWN not in states.values()
        detail = "module available but not loaded" if known else "not loaded (and no kernel config to say if it exists)"
        return Check(feature.name, False, detail, feature.how)
    described = _describe_options(feature, kernel)
    if feature.name in attempts.results:
        worked, said = attempts.results[feature.name]
        if worked:
            return Check(feature.name, True, f"works in a throwaway netns ({described})", "")
        return Check(feature.name, False, f"failed in a throwaway netns: {said}", feature.how or VM_HINT)
    reason = attempts.not_tried.get(feature.name, "no attempt")
    if UNKNOWN in states.values():
        how = "run `lab doctor` as root so it can try" if reason == "needs root" else VM_HINT
        return Check(feature.name, False, f"unknown: no kernel config, not tried ({reason})", how)
    tried = "" if reason == "no attempt" else f"; not tried: {reason}"
    return Check(feature.name, True, f"{described}{tried}", "")


def _built_without(options: list[str]) -> str:
    # The first missing option is the one to ask for; the rest usually depend on it.
    return f"kernel built without {options[0]}: {VM_HINT}"


def combine_trace(parts: list[Check]) -> Check:
    """Either xt TRACE or nftrace is enough to follow a packet through the rules."""
    detail = "; ".join(f"{p.name}: {p.detail}" for p in parts)
    present = any(p.present for p in parts)
    how = "" if present else " / ".join(p.how_to_get for p in parts if p.how_to_get)
    return Check("trace", present, detail, how)


def _find_tools(names: Iterable[str]) -> dict[str, str | None]:
    return {name: shutil.which(name, path=_SEARCH_PATH) for name in names}


def _iptables_backend(path: str) -> str:
    """Which backend the distribution's iptables-restore is: follow the alternatives symlinks by name."""
    current = path
    for _ in range(8):
        if "legacy" in current or "nft" in current:
            return "nft" if "nft" in current else "legacy"
        if not os.path.islink(current):
            break
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return ""


def tool_check(name: str, path: str | None) -> Check:
    if path is None:
        return Check(name, False, "not found on PATH or in sbin", f"apt-get install {TOOLS[name]}", kind="tool")
    detail = path
    if name == "iptables-restore" and (backend := _iptables_backend(path)):
        detail += f" ({backend} backend)"
    return Check(name, True, detail, "", kind="tool")


def run_checks() -> list[Check]:
    """Every kernel feature and tool the harness uses: present or not, why, and how to get it."""
    kernel = Kernel.running()
    tools = _find_tools([*TOOLS, *_HELPERS])
    attempts = run_attempts([*FEATURES, *TRACE_PARTS], kernel, tools)
    checks = [Check("kernel", True, kernel.summary(), "")]
    checks += [judge(f, kernel, tools, attempts) for f in FEATURES]
    checks.append(combine_trace([judge(f, kernel, tools, attempts) for f in TRACE_PARTS]))
    checks += [tool_check(name, tools[name]) for name in TOOLS]
    return checks


# ---------------------------------------------------------------- for the CLI and for tests


def format_checks(checks: Iterable[Check]) -> Table:
    table = Table(title="lab doctor", title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("detail")
    table.add_column("how to get it")
    kind = None
    for check in checks:
        if kind is not None and check.kind != kind:
            table.add_section()
        kind = check.kind
        mark = "[green]✔[/green]" if check.present else "[red]✘[/red]"
        table.add_row(mark, check.name, check.detail, check.how_to_get)
    return table


@functools.cache
def _cached_checks() -> dict[str, Check]:
    return {c.name: c for c in run_checks() if c.kind == "kernel"}


def _kernel_check(feature: str) -> Check:
    checks = _cached_checks()
    if feature not in checks:
        # A typo must not silently skip a test forever.
        raise ValueError(f"unknown kernel feature {feature!r}; known: {', '.join(checks)}")
    return checks[feature]


def running_kernel() -> str:
    """The release of the kernel the lab runs on (`uname -r`: the host's, or the guest's under `lab vm`), read
    here once and given to describe (`when: {kernel: ...}`) and, in the Topology, to render: neither reads the
    machine."""
    return platform.release()


def machine_arch() -> str:
    """This machine's architecture by Go's name, as kubelet labels a node (`kubernetes.io/arch`): the lab's nodes
    are namespaces of this machine. Read here and given to describe, which reads nothing from the machine."""
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def kernel_has(feature: str) -> bool:
    """Whether the running kernel can do `feature` (a name from run_checks()); computed once per process."""
    return _kernel_check(feature).present


def skip_reason(feature: str) -> str:
    """A pytest skip reason for a missing feature: what is missing and how to get it."""
    check = _kernel_check(feature)
    return f"needs {feature}: {check.detail}" + (f" — {check.how_to_get}" if check.how_to_get else "")
