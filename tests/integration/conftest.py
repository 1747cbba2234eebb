from __future__ import annotations

import os

import pytest
from support.host import host_state, lab_namespaces, strip_volatile
from support.netns import FreshNetns


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.root)


@pytest.fixture(autouse=True)
def needs_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: builds network namespaces (run with sudo)")


@pytest.fixture
def host_unchanged():
    before = strip_volatile(host_state())
    yield
    after = strip_volatile(host_state())
    changed = [k for k in before if before[k] != after[k]]
    assert not changed, f"the host's network namespace changed: {changed}\nbefore: {before}\nafter: {after}"


@pytest.fixture
def own_namespaces(monkeypatch):
    """A callable listing the namespaces still there of the runs this test made in this process (other runs, of
    other tests or workers, may come and go meanwhile: they are not this test's business)."""
    from lab.realize import build, runs

    prefixes: list[str] = []

    def recorded() -> str:
        prefixes.append(runs.new_prefix())
        return prefixes[-1]

    monkeypatch.setattr(build, "new_prefix", recorded)
    return lambda: [ns for ns in lab_namespaces() if ns.startswith(tuple(f"{p}-" for p in prefixes))]


@pytest.fixture
def fresh_netns(host_unchanged):
    """A new, empty network namespace for the test (support.netns); the host's own is checked unchanged after."""
    with FreshNetns() as netns:
        yield netns
