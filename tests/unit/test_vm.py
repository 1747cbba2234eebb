"""lab vm: the parts that need no VM — kernel SPECs, the private apt config, the init scripts, the console."""

from __future__ import annotations

import gzip
import lzma
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from rich.console import Console as RichConsole

from lab.vm import VmError, VmResult
from lab.vm.apt import PrivateApt, machine_mirror, meta_dependency, mirror_from_sources
from lab.vm.cli import Row, matrix_table
from lab.vm.console import EXIT, FAIL, START, Console, Phase, clean_line
from lab.vm.errors import VmPanic, VmTimeout
from lab.vm.initramfs import GUEST_JOB_DIR, init_script, is_static_elf, stage2_script
from lab.vm.kernels import KernelSpec, parse_spec
from lab.vm.modules import copy_uncompressed, load_order, parse_builtin, parse_modules_dep
from lab.vm.qemu import Boot, Run, _check, accel_plan, qemu_argv
from lab.vm.run import _check_cwd, command_script, guest_environment
from lab.vm.vmlinux import extract, has_pvh_entry

# ---------------------------------------------------------------- kernel SPEC


def test_debian_release_names_and_codenames():
    assert parse_spec("debian-12") == KernelSpec(name="debian-12", suite="bookworm")
    assert parse_spec("debian-13") == KernelSpec(name="debian-13", suite="trixie")
    assert parse_spec("bookworm") == KernelSpec(name="debian-12", suite="bookworm")
    backports = KernelSpec(name="debian-13-backports", suite="trixie-backports")
    assert parse_spec("debian-13-backports") == parse_spec("trixie-backports") == backports
    assert parse_spec("debian-14") == parse_spec("forky") == KernelSpec(name="debian-14", suite="forky")


def test_a_vmlinuz_path_needs_its_modules():
    spec = parse_spec("/boot/vmlinuz-6.1.0-1-amd64", modules="/lib/modules/6.1.0-1-amd64")
    assert spec.vmlinuz == Path("/boot/vmlinuz-6.1.0-1-amd64")
    assert spec.modules == Path("/lib/modules/6.1.0-1-amd64")
    assert spec.suite is None
    with pytest.raises(VmError, match="--modules"):
        parse_spec("/boot/vmlinuz-6.1.0-1-amd64")


def test_bad_specs_say_what_is_accepted():
    with pytest.raises(VmError, match="debian-12"):
        parse_spec("ubuntu-24")
    with pytest.raises(VmError, match="--modules goes with a vmlinuz path"):
        parse_spec("debian-12", modules="/lib/modules/x")


# ---------------------------------------------------------------- private apt configuration

DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_mirror_comes_from_the_machines_sources_not_the_security_archive():
    assert mirror_from_sources([DEB822]) == "http://mirror.example/debian"
    security_first = "deb http://sec.example/debian-security bookworm-security main\n"
    one_line = "deb [arch=amd64] http://other.example/debian/ bookworm main contrib\n"
    assert mirror_from_sources([security_first, one_line]) == "http://other.example/debian"


def test_mirror_skips_disabled_and_foreign_entries():
    disabled = DEB822.replace("Types: deb\n# http", "Types: deb\nEnabled: no\n# http", 1)
    nodesource = "Types: deb\nURIs: https://deb.nodesource.example/node_20.x\nSuites: nodistro\n"
    assert mirror_from_sources([nodesource, disabled]) is None


def test_machine_mirror_reads_etc_apt_and_honours_the_override(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_DEBIAN_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list.d" / "old.list.disabled").write_text("deb http://no.example/debian bookworm main\n")
    assert machine_mirror(tmp_path) == "http://mirror.example/debian"
    monkeypatch.setenv("LAB_DEBIAN_MIRROR", "http://local.example/debian/")
    assert machine_mirror(tmp_path) == "http://local.example/debian"


def test_private_apt_writes_only_under_its_root(tmp_path):
    apt = PrivateApt(tmp_path / "apt", "http://mirror.example/debian", "trixie")
    assert apt.sources_text() == (
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example/debian trixie main\n"
    )
    options = apt.options()
    settings = dict(o.split("=", 1) for o in options[1::2])
    assert options[::2] == ["-o"] * len(settings)
    private = ("Dir::Etc::sourcelist", "Dir::Etc::sourceparts", "Dir::State::Lists", "Dir::State::status")
    for key in (*private, "Dir::Cache"):
        assert settings[key].startswith(str(tmp_path / "apt")), key
    assert not any("/etc/apt" in value or "/var/lib" in value for value in settings.values())
    apt.prepare()
    assert (tmp_path / "apt" / "sources.list").read_text() == apt.sources_text()
    assert (tmp_path / "apt" / "sources.list.d").is_dir() and (tmp_path / "apt" / "status").read_text() == ""


def test_meta_package_names_the_concrete_image():
    show = "Package: linux-image-amd64\nVersion: 6.1.176-1\nDepends: linux-image-6.1.0-50-amd64 (= 6.1.176-1)\n"
    assert meta_dependency(show) == "linux-image-6.1.0-50-amd64"
    trixie = "Depends: linux-image-6.12.48+deb13-amd64 (= 6.12.48-1)\n"
    assert meta_dependency(trixie) == "linux-image-6.12.48+deb13-amd64"
    assert meta_dependency("Package: linux-image-amd64\n") is None


# ---------------------------------------------------------------- modules for the initramfs

MODULES_DEP = """kernel/fs/netfs/netfs.ko:
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko
kernel/net/9p/9pnet.ko:
kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko virtio_ring.ko virtio.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio.ko:
kernel/fs/overlayfs/overlay.ko:
"""


def test_load_order_puts_dependencies_first_and_skips_builtins():
    deps = parse_modules_dep(MODULES_DEP)
    assert deps["9p"][0] == "kernel/fs/9p/9p.ko.xz"
    order = load_order(("9pnet_virtio", "9p", "virtio_pci", "overlay"), deps, parse_builtin("kernel/virtio_pci.ko\n"))
    assert set(order) == {"9pnet", "virtio_ring", "virtio", "9pnet_virtio", "netfs", "fscache", "9p", "overlay"}
    for module, needs in deps.items():
        for dep in needs[1]:
            if module in order:
                assert order.index(dep) < order.index(module), (dep, module)


def test_a_module_neither_loadable_nor_built_in_is_an_error():
    with pytest.raises(VmError, match="virtio_pci"):
        load_order(("virtio_pci",), parse_modules_dep(MODULES_DEP), set())


@pytest.mark.parametrize(("suffix", "pack"), [(".ko.xz", lzma.compress), (".ko.gz", gzip.compress), (".ko", bytes)])
def test_modules_are_unpacked_for_busybox_insmod(tmp_path, suffix, pack):
    source = tmp_path / f"m{suffix}"
    source.write_bytes(pack(b"\x7fELF module"))
    copy_uncompressed(source, tmp_path / "out.ko")
    assert (tmp_path / "out.ko").read_bytes() == b"\x7fELF module"


# ---------------------------------------------------------------- init scripts


def _init() -> str:
    return init_script(
        "6.1.0-50-amd64",
        ["virtio", "virtio_pci", "9pnet", "9pnet_virtio", "netfs", "9p", "overlay"],
        "/cache/lab/kernels/debian-12/tree/lib/modules/6.1.0-50-amd64",
        "/cache/lab/kernels/debian-12/tree/boot/config-6.1.0-50-amd64",
    )


def test_init_loads_modules_in_the_given_order_then_mounts_the_host():
    script = _init()
    assert script.startswith("#!/bin/busybox sh\n")
    assert "for m in virtio virtio_pci 9pnet 9pnet_virtio netfs 9p overlay; do insmod /modules/$m.ko" in script
    assert script.index("insmod") < script.index("mount9p root /lower ro")
    assert "mount9p job /job rw" in script


def test_init_makes_a_writable_root_with_the_guest_kernels_modules_and_config():
    script = _init()
    assert "lowerdir=/lower,upperdir=/scratch/upper,workdir=/scratch/work overlay /newroot" in script
    assert "tmpfs /newroot/run" in script
    assert "tmpfs /newroot/tmp" not in script  # a checkout under /tmp must stay visible
    assert (
        "mount --bind /lower/cache/lab/kernels/debian-12/tree/lib/modules/6.1.0-50-amd64 "
        "/newroot/lib/modules/6.1.0-50-amd64" in script
    )
    assert "/newroot/boot/config-6.1.0-50-amd64" in script
    assert f"mount --move /job /newroot{GUEST_JOB_DIR}" in script
    assert "exec switch_root /newroot" in script


def test_init_without_a_config_skips_it():
    script = init_script("6.1.0-1-amd64", ["9p"], "/m/6.1.0-1-amd64", None)
    assert "/boot/config" not in script


def test_stage2_marks_the_command_and_powers_off():
    script = stage2_script()
    start, run, exit_ = script.index(f'echo "{START} $1"'), script.index("cmd.sh"), script.index(f'"{EXIT} $1 $status"')
    assert start < run < exit_ < script.index("poweroff -f")
    assert script.index(f">{GUEST_JOB_DIR}/status") < exit_  # the share has the status before the console does
    assert "printk" in script  # kernel chatter stays off the console the output travels on


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh to check the syntax")
@pytest.mark.parametrize("script", [_init(), stage2_script()], ids=["init", "stage2"])
def test_scripts_are_valid_shell(script):
    assert subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True).returncode == 0


def _elf(phdrs: list[tuple[int, bytes]], interp: bool = False) -> bytes:
    """A minimal 64-bit ELF whose program headers are (type, segment bytes)."""
    segments = [(3, b"/lib64/ld-linux-x86-64.so.2\0")] if interp else []
    segments += phdrs
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)
    struct.pack_into("<HH", header, 0x36, 56, len(segments))
    table, data, offset = b"", b"", 64 + 56 * len(segments)
    for ptype, content in segments:
        table += struct.pack("<IIQQQQQQ", ptype, 0, offset + len(data), 0, 0, len(content), len(content), 1)
        data += content
    return bytes(header) + table + data


def _xen_note(ntype: int) -> bytes:
    return struct.pack("<III", 4, 4, ntype) + b"Xen\0" + b"\0\0\0\0"


def test_static_elf_is_told_from_dynamic(tmp_path):
    (tmp_path / "static").write_bytes(_elf([(1, b"code")]))
    (tmp_path / "dynamic").write_bytes(_elf([(1, b"code")], interp=True))
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert is_static_elf(tmp_path / "static")
    assert not is_static_elf(tmp_path / "dynamic")
    assert not is_static_elf(tmp_path / "script")


def test_vmlinux_is_found_in_a_bzimage_and_its_pvh_note_read():
    elf = _elf([(4, _xen_note(6) + _xen_note(18))])
    bzimage = b"MZ setup code \x1f\x8b not gzip" + lzma.compress(elf, format=lzma.FORMAT_XZ) + b"trailer"
    assert extract(bzimage) == elf
    assert has_pvh_entry(elf)
    assert not has_pvh_entry(_elf([(4, _xen_note(6))]))
    assert extract(b"MZ nothing packed here") is None


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd tool (apt-get install zstd)")
def test_vmlinux_is_found_in_a_zstd_bzimage():
    elf = _elf([(4, _xen_note(18))])
    packed = subprocess.run(["zstd", "-c", "-q"], input=elf, capture_output=True, check=True).stdout
    assert extract(b"MZ setup" + packed + b"\0" * 64) == elf


# ---------------------------------------------------------------- the command and its environment


def test_guest_environment_keeps_the_essentials_and_puts_the_venv_first():
    host = {"PATH": "/usr/bin:/bin", "HOME": "/root", "LAB_CACHE": "/c", "SSH_AUTH_SOCK": "/s", "LANG": "C.UTF-8"}
    env = guest_environment(host, "6.1.0-50-amd64", "/checkout/.venv/bin", "dumb")
    assert env["PATH"].split(":")[0] == "/checkout/.venv/bin"
    assert "/usr/sbin" in env["PATH"].split(":")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["LAB_VM"] == "1" and env["LAB_VM_KERNEL"] == "6.1.0-50-amd64"
    assert env["LAB_CACHE"] == "/c" and env["LANG"] == "C.UTF-8" and env["HOME"] == "/root"
    assert "SSH_AUTH_SOCK" not in env


COMMAND = ["sh", "-c", 'echo "$GREETING from $(pwd)"; [ -t 1 ] || echo piped; exit 3']


def test_command_script_for_a_terminal_sizes_the_console_and_execs(tmp_path):
    script = command_script(COMMAND, tmp_path, {"GREETING": "it's me"}, tty=(132, 40))
    assert script.splitlines()[1] == f"cd {tmp_path} || exit 126"
    assert "stty -F /dev/console cols 132 rows 40" in script
    assert script.splitlines()[-1].startswith("exec sh -c ")
    # Run it here, minus the console sizing (that belongs to the guest's console only).
    local = "\n".join(line for line in script.splitlines() if not line.startswith("stty"))
    proc = subprocess.run(["sh", "-c", local], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (3, f"it's me from {tmp_path}\npiped\n")


def test_command_script_without_a_terminal_pipes_the_output_and_keeps_the_status(tmp_path):
    script = command_script(COMMAND, tmp_path, {"GREETING": "hi"})
    assert "stty" not in script and "PYTHONUNBUFFERED=1" in script
    local = script.replace(f"{GUEST_JOB_DIR}/cmd.status", str(tmp_path / "cmd.status"))
    proc = subprocess.run(["sh", "-c", local], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (3, f"hi from {tmp_path}\npiped\n")
    missing = command_script(["no-such-command-here"], tmp_path, {"PATH": "/usr/bin:/bin"})
    local = missing.replace(f"{GUEST_JOB_DIR}/cmd.status", str(tmp_path / "cmd.status"))
    assert subprocess.run(["sh", "-c", local], capture_output=True).returncode == 127


def test_a_cwd_the_guest_covers_with_tmpfs_is_refused():
    with pytest.raises(VmError, match="under /run"):
        _check_cwd(Path("/run/somewhere"))
    assert _check_cwd(Path("/tmp/checkout")) == Path("/tmp/checkout")
    assert _check_cwd(Path("/usr")) == Path("/usr")


# ---------------------------------------------------------------- the console


def _feed(console: Console, lines: list[str]) -> list[str]:
    return [text for line in lines if (text := console.feed(line)) is not None]


def test_console_takes_the_output_between_the_markers():
    console = Console("t0k")
    out = _feed(
        console,
        [
            "SeaBIOS (version 1.16.2-debian-1.16.2-1)",
            f"Booting from ROM..{START} t0k",  # firmware text without a newline before the marker
            "ok",
            f"{EXIT} t0k 3",
            "[    5.17] reboot: Power down",
        ],
    )
    assert out == ["ok"]
    assert console.phase is Phase.DONE and console.exit_status == 3
    assert console.panic is None and console.failure is None


def test_markers_with_another_token_are_just_output():
    console = Console("right")
    _feed(console, [f"{START} right", f"{EXIT} wrong 0", f"assert '{EXIT} right 1' == ''", "last"])
    assert console.phase is Phase.COMMAND and console.exit_status is None
    assert console.output == [f"{EXIT} wrong 0", f"assert '{EXIT} right 1' == ''", "last"]


def test_exit_marker_after_output_without_a_newline():
    console = Console("t")
    assert _feed(console, [f"{START} t", f"no newline{EXIT} t 0"]) == ["no newline"]
    assert console.exit_status == 0


def test_panic_is_recognised_in_any_phase():
    console = Console("t")
    _feed(console, [f"{START} t", "running", "[   12.345678] Kernel panic - not syncing: Fatal exception in interrupt"])
    assert console.panic == "Kernel panic - not syncing: Fatal exception in interrupt"
    assert console.output == ["running"]
    boot = Console("t")
    _feed(boot, ["Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"])
    assert boot.panic is not None and boot.phase is Phase.BOOT


def test_init_failure_is_reported():
    console = Console("t")
    _feed(console, [f"{FAIL} mount the host root (9p tag root)"])
    assert console.failure == "mount the host root (9p tag root)"


def test_clean_line_drops_carriage_returns_and_terminal_escapes():
    assert clean_line(b"\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS (version 1.16.2)\r\n") == "SeaBIOS (version 1.16.2)"
    assert clean_line(b"caf\xc3\xa9 \xff\r") == "café \ufffd"


# ---------------------------------------------------------------- qemu


def test_accel_plan():
    assert accel_plan("tcg", True, False) == ["tcg"]
    assert accel_plan("auto", True, False) == ["kvm", "tcg"]
    assert accel_plan("auto", True, True) == ["tcg"]  # KVM failed with this kernel before
    assert accel_plan("auto", False, False) == ["tcg"]
    with pytest.raises(VmError, match="/dev/kvm"):
        accel_plan("kvm", False, False)
    with pytest.raises(VmError, match="unknown accelerator"):
        accel_plan("hvf", True, False)


def test_qemu_shares_the_host_root_read_only_and_never_reboots():
    argv = qemu_argv("qemu", Boot(Path("/k"), Path("/i"), Path("/job"), mem_mb=512))
    assert argv[argv.index("-accel") + 1] == "tcg"
    assert argv[argv.index("-m") + 1] == "512"
    assert "-no-reboot" in argv and "-nographic" in argv
    assert "panic=-1" in argv[argv.index("-append") + 1]
    shares = [argv[i + 1] for i, a in enumerate(argv) if a == "-virtfs"]
    assert "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap" in shares
    assert any("path=/job,mount_tag=job" in s and "readonly" not in s for s in shares)


def _ended_run(tmp_path: Path, lines: list[str], timed_out: bool = False) -> Run:
    run = Run(Console("t"), returncode=0, started=0.0, timed_out=timed_out)
    _feed(run.console, lines)
    (tmp_path / "qemu.stderr").write_text("")
    return run


def test_status_from_the_share_when_the_console_lost_the_marker(tmp_path):
    run = _ended_run(tmp_path, [f"{START} t", "out"])
    (tmp_path / "status").write_text("4\n")
    _check(run, tmp_path / "qemu.stderr", 60)
    assert run.console.exit_status == 4 and run.command_started is not None


@pytest.mark.parametrize(
    ("lines", "timed_out", "error", "message"),
    [
        ([f"{START} t", "Kernel panic - not syncing: Fatal exception"], False, VmPanic, "Fatal exception"),
        ([f"{START} t", "still running"], True, VmTimeout, "60 s reached while the command ran"),
        (["booting"], True, VmTimeout, "before the command started"),
        ([f"{FAIL} insmod 9p"], False, VmError, "could not be set up: insmod 9p"),
        (["booting"], False, VmError, "QEMU exited with status 0, before the command started"),
    ],
)
def test_a_run_without_exit_status_says_why(tmp_path, lines, timed_out, error, message):
    run = _ended_run(tmp_path, lines, timed_out)
    with pytest.raises(error, match=message) as raised:
        _check(run, tmp_path / "qemu.stderr", 60)
    assert raised.value.command_started == (lines[0] == f"{START} t")


# ---------------------------------------------------------------- matrix table


def test_matrix_table_shows_results_and_errors():
    rows = [
        Row("debian-12", VmResult(0, "collected 3 items\n3 passed\n", "6.1.0-50-amd64", 2.61, 10.04)),
        Row("debian-13", None, VmPanic("the guest kernel panicked: Kernel panic - not syncing: x")),
        Row("old", None, VmTimeout("time limit of 5 s reached before the command started")),
    ]
    console = RichConsole(record=True, width=200)
    console.print(matrix_table(rows))
    text = console.export_text()
    assert "6.1.0-50-amd64" in text and "3 passed" in text and "2.6" in text and "10.0" in text
    assert "panic" in text and "timeout" in text


def test_cli_takes_the_command_after_the_double_dash():
    from lab.cli import parser

    args = parser().parse_args(["vm", "run", "--kernel", "debian-13", "--mem", "1024", "--", "sh", "-c", "exit 3"])
    assert args.kernel == "debian-13" and args.mem == 1024
    assert args.cmd[-3:] == ["sh", "-c", "exit 3"]
    args = parser().parse_args(["vm", "matrix", "--kernels", "debian-12,debian-13", "--", "true"])
    assert args.kernels == "debian-12,debian-13" and args.cmd[-1] == "true"
