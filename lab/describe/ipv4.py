"""Address fields of a scenario file: the lab models IPv4 clusters only, and says so when given anything else."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator


def address(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(f"expected an IPv4 address (the lab models IPv4 clusters only), got {value!r}") from None
    return value


def network(value: str) -> str:
    """A network written as such: 10.244.1.0/24, not 10.244.1.5/24."""
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"expected an IPv4 network such as 10.244.1.0/24, got {value!r} ({exc})") from None
    return value


Address = Annotated[str, AfterValidator(address)]
