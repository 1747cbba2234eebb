"""The whole test session keeps its lab runs to itself (support.private_run): it neither sees nor touches the
runs of anyone else on the machine, nor they its own."""

from __future__ import annotations

import os

from support.private_run import keep_lab_state_private


def pytest_configure(config) -> None:  # noqa: ANN001 - pytest's hook
    if os.geteuid() == 0:  # without root no test builds anything (and unshare is refused)
        keep_lab_state_private()
