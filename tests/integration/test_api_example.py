"""docs/api.md's complete example test, read out of the page and run with the plugin's own `lab_up` fixture, so
that the documentation cannot drift from what the API does."""

from __future__ import annotations

import re

from support.host import REPO

PAGE = REPO / "docs" / "api.md"


def documented_test() -> tuple[str, str]:
    """The page's example test: the python block that defines a test_ function; its source and the name."""
    for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S):
        if match := re.search(r"^def (test_\w+)\(lab_up\):", block, re.M):
            return block, match.group(1)
    raise AssertionError(f"{PAGE} has no example test (a python block with `def test_...(lab_up):`)")


def test_the_documented_example_runs(lab_up, host_unchanged, own_namespaces, monkeypatch):
    monkeypatch.chdir(REPO)  # the page's paths are relative to the repository, where its reader runs pytest
    source, name = documented_test()
    namespace: dict[str, object] = {}
    exec(compile(source, str(PAGE), "exec"), namespace)  # noqa: S102 - the repository's own documentation
    namespace[name](lab_up)
    assert own_namespaces(), "the example built no lab"
