"""lab: Kubernetes Service networking reproduced on a real Linux kernel. `lab.up(FILE, variant=...)` is the
Python API (lab.api, docs/api.md); imported when first used, so that importing a stage of lab does not load it."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "up":
        from lab.api import up

        return up
    raise AttributeError(f"module 'lab' has no attribute {name!r}")
