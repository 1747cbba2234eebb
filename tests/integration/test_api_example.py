"""docs/api.md's complete example tests, read out of the page and run with the plugin's own `lab_up` fixture, so
that the documentation cannot drift from what the API does."""

from __future__ import annotations

import re

import pytest
from support.host import REPO

PAGE = REPO / "docs" / "api.md"


def documented_tests() -> dict[str, str]:
    """The page's example tests: each python block that defines a test_ function, by that function's name."""
    found = {}
    for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S):
        if match := re.search(r"^def (test_\w+)\(lab_up\):", block, re.M):
            found[match.group(1)] = block
    return found


def test_the_page_has_its_example_tests():
    assert len(documented_tests()) == 2, f"{PAGE}: expected two example tests (python blocks with `def test_...`)"


@pytest.mark.parametrize("name", sorted(documented_tests()))
def test_the_documented_example_runs(name, lab_up, host_unchanged, own_namespaces, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the page's scenarios are the catalogue's, by name: its reader runs pytest anywhere
    namespace: dict[str, object] = {}
    exec(compile(documented_tests()[name], str(PAGE), "exec"), namespace)  # noqa: S102 - the repository's own docs
    namespace[name](lab_up)
    assert own_namespaces(), "the example built no lab"
