"""`when: {kernel: ...}`: an expectation or a step for the kernels a behaviour belongs to. A condition is an
operator and a release (`<6.1`, `>=5.10`, `==6.12`); a list is a range, every condition holding. The running
kernel's release (`uname -r`, e.g. 6.1.0-50-amd64) is compared on as many numbers as the condition gives:
`<6.1` holds for 5.10.0-26-amd64 and not for 6.1.0-50-amd64, `==6.1` for every 6.1.x.

The release is given to describe by the pipeline, which reads it once (the host's, or the guest's under
`lab vm`): describe reads nothing of the machine."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

KERNEL = "kernel"  # the key of `when` that names the kernel, beside the matrix axes

_OPERATORS: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_CONDITION = re.compile(r"^\s*(<=|>=|==|<|>)\s*(\d+(?:\.\d+){0,2})\s*$")
_RELEASE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


class KernelConditionError(ValueError):
    """A condition that is not one: the message says what was expected."""


def conditions(value: object) -> list[str]:
    """The conditions of a `kernel:` value (one string, or a list of them as a range)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise KernelConditionError('an empty list: give one or more conditions, e.g. [">=5.10", "<6.1"]')
    for item in items:
        if not isinstance(item, str) or not _CONDITION.match(item):
            raise KernelConditionError(
                f"{item!r} is no kernel condition: expected an operator (<, <=, >=, > or ==) and a release of one "
                'to three numbers, such as "<6.1" or ">=5.10.0", or a list of them for a range'
            )
    return [str(item) for item in items]


def release_numbers(release: str) -> tuple[int, ...]:
    """`6.1.0-50-amd64` → (6, 1, 0); a release that does not start with numbers is refused in words."""
    match = _RELEASE.match(release)
    if not match:
        raise KernelConditionError(f"kernel release {release!r} does not start with MAJOR.MINOR")
    return tuple(int(n) for n in match.groups(default="0"))


def holds(release: str, written: list[str]) -> bool:
    """Whether the running kernel's release satisfies every condition."""
    have = release_numbers(release)
    for condition in written:
        match = _CONDITION.match(condition)
        assert match is not None  # checked by conditions()
        wanted = tuple(int(n) for n in match.group(2).split("."))
        if not _OPERATORS[match.group(1)](have[: len(wanted)], wanted):
            return False
    return True
