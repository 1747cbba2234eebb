"""The lines of a rules text (iptables-save or -restore input, an nft script) that say something."""

from __future__ import annotations

from collections.abc import Iterator


def content_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line that says something, stripped, with its 1-based number (the one an error names): blank lines and
    comments (`#`, as iptables-save and nft write them) are left out."""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, line
