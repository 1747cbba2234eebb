from __future__ import annotations

import os

import pytest
from support.host import host_state, strip_volatile
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
def fresh_netns(host_unchanged):
    """A new, empty network namespace for the test (support.netns); the host's own is checked unchanged after."""
    with FreshNetns() as netns:
        yield netns
