"""No two test modules share a basename. The test directories are not packages, so pytest imports each module by
its basename: the second `test_X.py` fails to collect ("import file mismatch") in a run that collects both, which
is the README's test command, and under `lab vm` it took the ipvs suite's collection down with it (three times:
test_debtools, test_bench_sync, test_external_ips_gate). A run of one directory alone never shows it."""

from __future__ import annotations

from collections import defaultdict

from support.host import REPO


def test_every_test_module_has_a_basename_of_its_own():
    paths: dict[str, list[str]] = defaultdict(list)
    for path in (REPO / "tests").rglob("test_*.py"):
        paths[path.name].append(str(path.relative_to(REPO)))
    shared = {name: where for name, where in paths.items() if len(where) > 1}
    assert not shared, f"test modules sharing a basename (rename one of each): {shared}"
