"""Printing what a user wrote (a scenario's names and whys, a dump's rules, an error naming them) as text.

Rich reads `[...]` in a string as markup: a probe named `[/]` raises MarkupError, and `[bold red]x[/]` or an OSC-8
link would be rendered. A raw ESC, CR or bidi override would reach the terminal and act on it. So every string a
user could have written goes through `literal`: a rich Text (never parsed as markup or emoji codes) whose
control characters are shown as escapes (`\\x1b`, `\\u202e`), as Python writes them.
"""

from __future__ import annotations

import unicodedata

from rich.text import Text

# Control (Cc), format (Cf: bidi overrides, zero-width), line and paragraph separators, surrogates, private use.
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co"}
_KEPT = {"\n", "\t"}  # layout, which a terminal cannot be steered with


def _shown(char: str) -> str:
    if char in _KEPT or unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every control character written out as its escape (for output that is not rich's)."""
    return "".join(_shown(char) for char in text)


def literal(text: object, style: str = "") -> Text:
    """`text` (str() of it) as rich prints it literally: no markup, control characters as escapes."""
    return Text(visible(str(text)), style=style)
