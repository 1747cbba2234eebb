"""install: a kube-proxy sync the kernel refused, said in words. A refusal is a result of the run (kube-proxy
logs it, counts it and retries), never an error of the lab; what it says names what the refusal left in the
kernel, which is what the real tool left there."""

from __future__ import annotations

import re


def sync_failed(mode: str) -> str:
    """How every line about a refused sync begins, e.g. "kube-proxy's iptables sync failed"."""
    return f"kube-proxy's {mode} sync failed"


_SAID = re.compile(r"(kube-proxy's \S+ sync failed): (.*)", re.S)


def failed_sync(line: str) -> tuple[str, str] | None:
    """A load's line split into (how it begins, why), or None when it says no sync failed."""
    said = _SAID.fullmatch(line)
    return (said.group(1), said.group(2)) if said else None


# The restore tools' own wording around the reason: a version prefix, where the error occurred, a usage hint.
_TOOL_PREFIX = re.compile(r"^\S+ v[\d.]+ \([^)]*\):\s*")
_NOISE = ("Error occurred at line", "Try `")
_LINE = re.compile(r"rejected line (\d+) of the")
_WHOLE = re.compile(r"^\S+ rejected the [^:]+: ")


def xtables_refusal(mode: str, message: str, text: str, resync: bool) -> str:
    """What kube-proxy's iptables or ipvs mode says when iptables-restore refuses its one restore of both tables
    (`message`: the lab's InstallError, naming the refused line of `text` when the tool named one).

    kube-proxy logs "Failed to execute iptables-restore", counts iptables_restore_failures_total and returns
    before anything a successful sync does next; its deferred check retries after the sync period with a full
    sync (syncProxyRules in pkg/proxy/iptables/proxier.go and pkg/proxy/ipvs/proxier.go at
    kiarashazarnia/kubernetes@4426ed5de01a08d75530f9e4c4814f6a28d806eb). iptables-restore commits each table at
    its COMMIT line, so the tables before the refused one are this sync's and the refused one and those after it
    keep what they had (seen with iptables-legacy and iptables-nft 1.8.9:
    tests/integration/test_xtables_sync_failure.py)."""
    lines = text.splitlines()
    numbered = _LINE.search(message)
    number = _refused_line(message, lines)
    committed, refused_in, rest = _tables(lines, number)
    # The lab's own first line names the refused line (said below) or only the tool.
    first, *stderr = message.splitlines()
    said = stderr if numbered else [_WHOLE.sub("", first), *stderr]
    reason = "; ".join(
        part for part in (_TOOL_PREFIX.sub("", line).strip() for line in said if not line.startswith(_NOISE)) if part
    )
    tool = message.split()[0]
    if number:
        where = f"{tool} refused line {number}, in the {refused_in} table ({lines[number - 1].strip()[:80]})"
    else:
        where = f"{tool} refused the whole restore"
    before = "what it had before this sync" if resync else "nothing of kube-proxy's (a first sync)"
    kept = [f"the {table} table keeps {before}" for table in ((refused_in,) if refused_in else ()) + rest]
    outcome = [f"the {table} table is this sync's" for table in committed] + kept
    if mode == "iptables" and "nat" not in committed and not resync:  # ipvs translates without nat rules
        outcome.append("the node has no Service rules")
    if mode == "ipvs" and resync:
        outcome.append(
            "IPVS was synced before the restore, and the virtual servers and kube-ipvs0 addresses of deleted "
            "Services stay (kube-proxy removes them only after a restore that succeeded)"
        )
    outcome.append("it retries with a full sync every sync period")
    return f"{sync_failed(mode)}: {where}: {reason} — {'; '.join(outcome)}"


def committed_tables(message: str, text: str) -> tuple[str, ...]:
    """The tables of kube-proxy's restore input `text` the refused restore committed before it stopped, as the
    tool's refused line (`message`, the lab's InstallError) places them: each table is committed at its COMMIT
    line, so those before the refused one are in the kernel; none where the tool named no line (it stopped before
    reading one: the xtables lock). Seen with both backends' iptables-restore 1.8.9: a table refused at one of its
    rules or at its COMMIT keeps what it had, the tables before it are the input's
    (tests/integration/test_xtables_sync_failure.py)."""
    lines = text.splitlines()
    return _tables(lines, _refused_line(message, lines))[0]


def _refused_line(message: str, lines: list[str]) -> int:
    """The line of the restore input the tool refused (1-based), 0 where it named none of them."""
    numbered = _LINE.search(message)
    return int(numbered.group(1)) if numbered and 0 < int(numbered.group(1)) <= len(lines) else 0


def _tables(lines: list[str], number: int) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """The tables of a restore input committed before its line `number` (1-based; 0: none was reached), the
    table that line is in, and the tables after it."""
    committed: list[str] = []
    later: list[str] = []
    current, refused_in = "", ""
    for index, line in enumerate(lines, start=1):
        if line.startswith("*"):
            current = line[1:].strip()
            if not number or index > number:
                later.append(current)
        if index == number:
            refused_in = current
        if line.strip() == "COMMIT" and index < number:
            committed.append(current)
    return tuple(committed), refused_in, tuple(later)
