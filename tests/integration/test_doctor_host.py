"""doctor proves features by trying them in a throwaway namespace, and leaves the host as it was."""

from __future__ import annotations

from lab import doctor


def test_run_checks_proves_the_basics_and_leaves_the_host_unchanged(host_unchanged):
    checks = {c.name: c for c in doctor.run_checks() if c.kind == "kernel"}
    for name in ("netns", "veth", "bridge"):
        assert checks[name].present, checks[name]
        assert "works in a throwaway netns" in checks[name].detail
