"""literal(): what a user wrote, printed by rich as written, its control characters escaped."""

from __future__ import annotations

import io

from rich.console import Console

from lab.report.literal import literal, visible


def printed(text: str) -> str:
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=True, color_system="truecolor").print(literal(text))
    return out.getvalue()


def test_markup_is_printed_as_written():
    for text in ("[/]", "[bold red]x[/]", "[link=https://example.com]x[/link]", ":smile:"):
        assert text in printed(text)


def test_control_characters_are_escaped_visibly():
    assert visible("a\x1b[31mb\rc\x07\u202ed\U000e0001") == "a\\x1b[31mb\\x0dc\\x07\\u202ed\\U000e0001"
    assert visible("tab\tand\nnewline, ünïcode ≠ →") == "tab\tand\nnewline, ünïcode ≠ →"
    shown = printed("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\")
    assert "\\x1b]8;;https://example.com" in shown
    assert "\x1b]8" not in shown  # no OSC-8 link reaches the terminal (rich's own styles are CSI: ESC [)
