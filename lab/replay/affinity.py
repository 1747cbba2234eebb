"""sessionAffinity: ClientIP in iptables mode: the xt_recent lists of the node namespace.

kube-proxy's KUBE-SEP chain records the client (`-m recent --name KUBE-SEP-X --set`), and its KUBE-SVC
chain sends a client it saw within timeoutSeconds back to that endpoint (`--rcheck --seconds N --reap`)
before any `-m statistic` choice. From one client, every connection after the first then reaches the same
endpoint: the replay sends a second connection to see that stickiness, then empties the lists before each
further connection so that every endpoint the rules can choose gets its turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.realize.enter import in_netns


@dataclass(frozen=True)
class Affinity:
    """What the second connection from the same client did."""

    lists: tuple[str, ...]  # the recent lists the first connection's client was recorded in
    seconds: int | None  # how long a recorded client sticks (--rcheck --seconds)
    sticky: bool  # the second connection was sent back to the first one's endpoint by the recent check
    endpoint: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "recent": self.lists[0] if len(self.lists) == 1 else list(self.lists),
            "seconds": self.seconds,
            "sticky": self.sticky,
            "endpoint": self.endpoint,
        }


def _mentions(line: str, name: str, option: str) -> bool:
    return f" --name {name} " in f"{line} " and f" {option} " in f"{line} "


class RecentLists:
    """The xt_recent lists a dump uses ({name: --seconds}), as they stand in one namespace."""

    def __init__(self, netns: str, lists: dict[str, int | None]) -> None:
        self.netns, self.lists = netns, lists

    def recorded(self, trace: tuple[str, ...]) -> tuple[str, ...]:
        """The lists a connection's rules recorded its client in (their `--set` rule moved)."""
        return tuple(name for name in self.lists if any(_mentions(line, name, "--set") for line in trace))

    def affinity(
        self, lists: tuple[str, ...], first: str | None, again: str | None, trace: tuple[str, ...]
    ) -> Affinity:
        """The verdict on a second connection that reached `again` with `trace`, after the first reached `first`."""
        rechecked = any(_mentions(line, name, "--rcheck") for name in lists for line in trace)
        seconds = next((self.lists[name] for name in lists if self.lists[name] is not None), None)
        return Affinity(lists, seconds, rechecked and again == first, first)

    def forget(self) -> None:
        """Empty every list ("/" clears one); /proc/net would be the main thread's namespace, so thread-self."""

        def clear() -> None:
            for name in self.lists:
                path = Path("/proc/thread-self/net/xt_recent", name)
                if path.exists():
                    path.write_text("/\n")

        in_netns(self.netns, clear)
