"""lab.vm: run a command under another kernel (a stock Debian one by default) in QEMU, in the host's files.

Example: `run_in_vm(["ipvsadm", "-Ln"], kernel="debian-12")` returns a VmResult with its exit status and output.
"""

from lab.vm.errors import VmError, VmPanic, VmTimeout
from lab.vm.run import VmResult, run_in_vm

__all__ = ["VmError", "VmPanic", "VmResult", "VmTimeout", "run_in_vm"]
