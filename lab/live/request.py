"""What `lab probe` sends a live lab's keeper, as a typed schema: one JSON object on one line, of at most
REQUEST_BYTES. Whatever a client sends (a width of 1e400, 100 000 `[`, a field no client writes) is refused
here with a message the client prints, before the keeper acts on it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lab.describe.resolve.parse import explain

REQUEST_BYTES = 64 * 1024  # a request is a few hundred bytes: names, an address, a few flags
_TEXT = 253  # the longest name a probe, actor or Service can have, as a DNS name: a request's strings are names
_TARGET = 63 + 1 + _TEXT + 1 + 63  # NAMESPACE/NAME:PORT, the port a Service port's name at the longest


class ProbeRequest(BaseModel):
    """A scenario probe by `name`, or an ad hoc one `from` an actor `to` TARGET:PORT (lab probe --from --to)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    name: str | None = Field(None, min_length=1, max_length=_TEXT)
    source: str | None = Field(None, alias="from", min_length=1, max_length=_TEXT)
    to: str | None = Field(None, min_length=1, max_length=_TARGET)
    protocol: Literal["tcp", "udp", "TCP", "UDP"] | None = None
    via: Literal["clusterIP", "nodePort", "externalIP", "loadBalancer"] | None = None
    node: str | None = Field(None, min_length=1, max_length=_TEXT)
    verbose: bool = False
    width: int = Field(120, ge=1, le=10000)  # the client's terminal columns (any a terminal has), for the answer
    color: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> ProbeRequest:
        adhoc = self.source is not None or self.to is not None
        if self.name is not None and adhoc:
            raise ValueError("a request names a scenario probe (name) or an ad hoc one (from and to), not both")
        if self.name is None and not adhoc:
            raise ValueError("a request names a scenario probe (name) or an ad hoc one (from and to)")
        if adhoc and (self.source is None or self.to is None):
            raise ValueError("an ad hoc probe needs both from and to")
        return self

    def adhoc(self) -> dict[str, str | None]:
        """As lab.live.adhoc reads an ad hoc probe's request."""
        return {"from": self.source, "to": self.to, "protocol": self.protocol, "via": self.via, "node": self.node}


_FIELDS = [field.alias or name for name, field in ProbeRequest.model_fields.items()]


class RequestError(Exception):
    """A request the keeper refuses: the message says what was wrong, for the client to print."""


def parse_request(line: bytes) -> ProbeRequest:
    """One request line; every mistake in it, each with the field it is in."""
    try:
        return ProbeRequest.model_validate_json(line)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"])
            if error["type"] == "extra_forbidden":  # explain() would suggest a scenario file's fields
                said = f"unknown field; a request has {', '.join(_FIELDS)}"
            else:
                said = explain(error)  # in words, as a scenario file's errors are (no "Input should be")
            problems.append(f"{where}: {said}" if where else said)
        raise RequestError("bad request: " + "; ".join(problems)) from None
