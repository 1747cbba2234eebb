"""Numbers as Kubernetes and the kernel's tools write them: ASCII digits only. Go's strconv.Atoi and
net.ParseCIDR read nothing else, while Python's str.isdigit() also takes '²' (which int() then refuses in its own
words) and int() reads any script's digits ('١٦' as 16)."""

from __future__ import annotations


def is_ascii_number(text: str) -> bool:
    """Whether text is one or more ASCII digits."""
    return text.isascii() and text.isdigit()
