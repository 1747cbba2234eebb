"""What a live lab's keeper writes beside its run state, and finding the live labs from another process."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from lab.describe.topology import variant_label
from lab.paths import STATE_DIR
from lab.realize.runs import RunState, alive, read_beside, recorded_runs

LIVE = ".live.json"
SOCKET = ".sock"
LOG = ".log"  # the keeper's: requests that failed inside it


class LiveLabError(Exception):
    """A command about live labs cannot be done: the message says why and what to do."""


def actor_named(name: str, actors: Collection[str], aliases: Mapping[str, str]) -> str | None:
    """The actor `name` names, as the lab names it (a pod by NAME, or by NAMESPACE/NAME when pods of several
    namespaces have that name) or as a scenario may (NAMESPACE/NAME of a pod the lab names by NAME: `aliases`);
    None when it names none. A bare NAME that pods of several namespaces have is refused, naming each."""
    if name in actors:
        return name
    if name in aliases:
        return aliases[name]
    several = sorted(actor for actor in actors if "/" not in name and actor.endswith(f"/{name}"))
    if several:
        raise LiveLabError(f"{name} names more than one pod ({', '.join(several)}): write NAMESPACE/{name}")
    return None


class NotRunnable(LiveLabError):
    """`lab exec`'s command cannot be started: the status a shell gives (127 not found, 126 not executable)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LiveLab:
    prefix: str
    scenario: str  # the file's absolute path
    name: str
    variant: dict[str, str]
    actors: dict[str, str]  # actor as the scenario names it → its namespace
    created: float
    digest: str  # the scenario file's sha256 when the lab was built
    aliases: dict[str, str] = field(default_factory=dict)  # NAMESPACE/NAME of a pod the lab names by NAME → NAME
    state: RunState | None = None  # the run's, as read from another process

    def to_json(self) -> str:
        keys = ("scenario", "name", "variant", "actors", "created", "digest", "aliases")
        fields = {k: getattr(self, k) for k in keys}
        return json.dumps(fields) + "\n"

    @classmethod
    def from_json(cls, state: RunState, text: str) -> LiveLab | None:
        """None for text a keeper did not write, or that names a namespace the run did not record."""
        try:
            data = json.loads(text)
            lab = cls(
                state.prefix,
                str(data["scenario"]),
                str(data["name"]),
                {str(k): str(v) for k, v in data["variant"].items()},
                {str(k): str(v) for k, v in data["actors"].items()},
                float(data["created"]),
                str(data["digest"]),
                # A keeper started before lab recorded aliases has none: its pods are reached by the lab's names.
                {str(k): str(v) for k, v in data.get("aliases", {}).items()},
                state,
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        recorded = set(lab.actors.values()) <= set(state.namespaces) and set(lab.aliases.values()) <= set(lab.actors)
        return lab if recorded else None

    def actor(self, name: str) -> str:
        """The actor `name` names (lab exec, lab shell): as the lab or the scenario names it."""
        actor = actor_named(name, self.actors, self.aliases)
        if actor is None:
            raise LiveLabError(f"{self.prefix} has no actor {name!r}; its actors are: {', '.join(sorted(self.actors))}")
        return actor

    @property
    def socket(self) -> str:
        return f"{STATE_DIR}/{self.prefix}{SOCKET}"

    @property
    def log(self) -> str:
        return f"{STATE_DIR}/{self.prefix}{LOG}"

    @property
    def variant_label(self) -> str:
        """The variant's values as every report names them ("" without a matrix)."""
        return variant_label(self.variant.items())

    @property
    def title(self) -> str:
        """The scenario's name and the variant's values: NAME (KEY=VALUE, ...), or NAME of one without a matrix."""
        return f"{self.name} ({self.variant_label})" if self.variant_label else self.name


def live_labs() -> list[LiveLab]:
    """Every live lab whose keeper runs, oldest first."""
    found = []
    for state in recorded_runs():
        text = read_beside(state.prefix, LIVE)
        if text is not None and alive(state) and (lab := LiveLab.from_json(state, text)) is not None:
            found.append(lab)
    return sorted(found, key=lambda lab: lab.created)


def pick(run: str | None) -> LiveLab:
    """The live lab `run` names, or the only one there is."""
    labs = live_labs()
    if run is not None:
        lab = next((lab for lab in labs if lab.prefix == run), None)
        if lab is None:
            known = ", ".join(lab.prefix for lab in labs) or "none (lab up FILE starts one)"
            raise LiveLabError(f"no live lab {run}; the live labs are: {known}")
        return lab
    if not labs:
        raise LiveLabError("no live lab: lab up FILE starts one")
    if len(labs) > 1:
        raise LiveLabError(f"{len(labs)} live labs: give --run, one of {', '.join(lab.prefix for lab in labs)}")
    return labs[0]
