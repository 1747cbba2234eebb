"""Where a node's kube-proxy rules differ from what render says that release writes: per chain (set, virtual
server), the entries missing from the node, the extra ones, the ones changed (a missing and an extra entry that
are mostly alike), and, where kube-proxy's order matters, entries out of order. Pure: both sides are texts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

from lab.replay.diff.parts import LAST_RULE, Part, Side

# How alike a missing and an extra entry must be to be one changed entry rather than two (difflib's ratio).
_CHANGED = 0.6
# At most this many (missing, extra) pairs are weighed in one part.
_PAIRS = 10_000


@dataclass(frozen=True)
class PartDiff:
    kind: str
    table: str
    name: str
    whole: str = ""  # "missing" (render has it, the node not) or "extra" (the node has it, render not)
    missing: tuple[str, ...] = ()
    extra: tuple[tuple[int, str], ...] = ()  # (line in the dump, entry)
    changed: tuple[tuple[str, int, str], ...] = ()  # (expected, line, found)
    order: tuple[tuple[int, str], ...] = ()  # the node's order of the entries both have, when it differs
    spec: tuple[str, str] | None = None  # (expected, found) declarations, when they differ

    @property
    def count(self) -> int:
        """How many differences: each entry missing, extra or changed, an order, a declaration."""
        entries = len(self.missing) + len(self.extra) + len(self.changed) + bool(self.order) + bool(self.spec)
        return entries or bool(self.whole)  # an empty chain one side lacks is one difference

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "table": self.table,
            "name": self.name,
            "whole": self.whole or None,
            "missing": list(self.missing),
            "extra": [{"line": line, "entry": entry} for line, entry in self.extra],
            "changed": [{"expected": e, "line": line, "found": f} for e, line, f in self.changed],
            "order": [{"line": line, "entry": entry} for line, entry in self.order],
            "declaration": {"expected": self.spec[0], "found": self.spec[1]} if self.spec else None,
        }


def _subtract(ours: tuple[str, ...], theirs: tuple[str, ...]) -> Counter[str]:
    return Counter(ours) - Counter(theirs)


def _in_order(part: Part, wanted: Counter[str]) -> list[tuple[int, str]]:
    """The entries of `wanted` (as many of each as it counts) with their lines, in the part's order."""
    budget = Counter(wanted)
    kept = []
    for line, entry in zip(part.lines, part.entries, strict=True):
        if budget[entry]:
            kept.append((line, entry))
            budget[entry] -= 1
    return kept


def _likeness(missing: str, extra: str) -> float:
    """difflib's ratio, after its cheap upper bounds rule out most pairs."""
    matcher = SequenceMatcher(None, missing, extra)
    if matcher.real_quick_ratio() < _CHANGED or matcher.quick_ratio() < _CHANGED:
        return 0.0
    return matcher.ratio()


def _pair(missing: list[str], extra: list[tuple[int, str]]) -> list[tuple[str, int, str]]:
    """Pair each missing entry with the extra entry most like it, best pairs first; removes what is paired. A chain
    rewritten wholesale (more than _PAIRS candidate pairs) is left as missing and extra: no pairing reads better."""
    if len(missing) * len(extra) > _PAIRS:
        return []
    scored = sorted(
        ((_likeness(m, e), i, j) for i, m in enumerate(missing) for j, (_, e) in enumerate(extra)),
        reverse=True,
    )
    used_m: set[int] = set()
    used_e: set[int] = set()
    pairs = []
    for ratio, i, j in scored:
        if ratio < _CHANGED:
            break
        if i not in used_m and j not in used_e:
            used_m.add(i)
            used_e.add(j)
            pairs.append((i, j))
    changed = [(missing[i], extra[j][0], extra[j][1]) for i, j in sorted(pairs)]
    missing[:] = [m for i, m in enumerate(missing) if i not in used_m]
    extra[:] = [e for j, e in enumerate(extra) if j not in used_e]
    return changed


def _order(expected: Part, found: Part) -> tuple[tuple[int, str], ...]:
    """The node's order of the entries both sides have, if it is not render's (ordered parts); for a set-like chain,
    kube-proxy's last rule if it is not last."""
    if not expected.ordered:
        last = expected.entries[-1] if expected.entries and LAST_RULE in expected.entries[-1] else None
        if last and last in found.entries and found.entries[-1] != last:
            return ((found.lines[found.entries.index(last)], last),)
        return ()
    both = Counter(expected.entries) & Counter(found.entries)
    ours, theirs = _in_order(expected, both), _in_order(found, both)
    return tuple(theirs) if [e for _, e in theirs] != [e for _, e in ours] else ()


def compare_part(expected: Part | None, found: Part | None, pair: bool = True) -> PartDiff | None:
    some = expected or found
    assert some is not None
    head = {"kind": some.kind, "table": some.table, "name": some.name}
    if found is None:
        assert expected is not None
        return PartDiff(**head, whole="missing", missing=expected.entries)
    if expected is None:
        return PartDiff(**head, whole="extra", extra=tuple(zip(found.lines, found.entries, strict=True)))
    extra = _in_order(found, _subtract(found.entries, expected.entries))
    missing = [entry for _, entry in _in_order(expected, _subtract(expected.entries, found.entries))]
    changed = _pair(missing, extra) if pair else []
    spec = (expected.spec, found.spec) if expected.spec != found.spec else None
    diff = PartDiff(
        **head,
        missing=tuple(missing),
        extra=tuple(extra),
        changed=tuple(changed),
        order=_order(expected, found),
        spec=spec,
    )
    return diff if diff.count else None


def compare(expected: Side, found: Side, pair: bool = True) -> list[PartDiff]:
    """Every part that differs, render's parts in their order first, then the node's extra parts. pair=False leaves
    changed entries as a missing and an extra one (a count to rank releases by, without weighing likeness)."""
    diffs = []
    for key in [*expected.parts, *(k for k in found.parts if k not in expected.parts)]:
        if diff := compare_part(expected.parts.get(key), found.parts.get(key), pair):
            diffs.append(diff)
    return diffs
