"""The VM test's report of the guest's pytest: the failing items and their messages, not their tracebacks."""

from __future__ import annotations

from support.pytest_output import failure_summary

GUEST = "\n".join(
    [
        "tests/integration/test_ipvs_load.py::test_a PASSED",
        "tests/integration/test_ipvs_load.py::test_b FAILED",
        "=================================== FAILURES ===================================",
        *(f"    frame {k} of pluggy/_callers.py" for k in range(700)),
        "E   AssertionError: refused, expected delivered",
        "=========================== short test summary info ============================",
        "FAILED tests/integration/test_ipvs_load.py::test_b - AssertionError: refused, expected delivered",
        "=================== 1 failed, 110 passed in 330.12s (0:05:30) ===================",
    ]
)


def test_only_the_failing_items_and_their_messages_are_kept():
    said = failure_summary(GUEST)
    assert said.splitlines()[1:] == [
        "FAILED tests/integration/test_ipvs_load.py::test_b - AssertionError: refused, expected delivered",
        "=================== 1 failed, 110 passed in 330.12s (0:05:30) ===================",
    ]


def test_without_a_summary_the_last_lines_are_kept():
    output = "\n".join(f"line {k}" for k in range(100)) + "\nINTERNALERROR> boom\n"
    assert failure_summary(output).splitlines() == [f"line {k}" for k in range(71, 100)] + ["INTERNALERROR> boom"]
