"""errors: why a VM run gave no result."""

from __future__ import annotations


class VmError(RuntimeError):
    """The VM could not run the command: a missing tool or package, a failed download, a boot that went wrong.

    `console` holds the last lines the guest printed, when there are any, so the caller can show them;
    `command_started` says whether the command had begun (its output may then have been streamed already).
    """

    def __init__(self, message: str, console: str = "", command_started: bool = False) -> None:
        super().__init__(message)
        self.console = console
        self.command_started = command_started


class VmPanic(VmError):
    """The guest kernel panicked (during boot or while the command ran)."""


class VmTimeout(VmError):
    """The time limit ran out; the VM was killed."""


# The Debian packages that bring each host tool the runner needs.
PACKAGES = {
    "qemu-system-x86_64": "qemu-system-x86",
    "busybox": "busybox-static",
    "cpio": "cpio",
    "apt-get": "apt",
    "dpkg-deb": "dpkg",
    "depmod": "kmod",
}
INSTALL_HINT = "lab vm needs qemu-system-x86, busybox-static and cpio; scripts/setup installs them"


def missing_tool(tool: str) -> VmError:
    return VmError(f"{tool} is not installed: apt-get install {PACKAGES.get(tool, tool)} ({INSTALL_HINT})")
