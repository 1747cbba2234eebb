"""What every test that boots a guest under `lab vm` is marked with: the `vm` marker, one guest at a time, and
skips naming what is missing."""

from __future__ import annotations

import os
import shutil

import pytest

GUEST_MARKS = [
    pytest.mark.vm,
    pytest.mark.xdist_group("vm"),  # one guest at a time: each takes a core and 2 GB
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the guest runs commands as root in the host's files"),
    pytest.mark.skipif(
        shutil.which("qemu-system-x86_64") is None,
        reason="needs qemu-system-x86_64: apt-get install qemu-system-x86 busybox-static cpio",
    ),
]
