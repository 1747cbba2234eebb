"""Names as Kubernetes' API validates them, each refusal said in words.

A namespace, a Service's name and its ports' names are written into iptables-restore and nft input (chain names,
comments): checking them with the API's own rules before anything is rendered is what keeps a scenario from adding
rules of its own (a quote, a newline or a space has no place in any of them).

The rules are k8s.io/apimachinery's (kubernetes/kubernetes at 008b3652959ca58af8be3fb5b6ecfe9ae7638282,
staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go: IsDNS1123Label, IsDNS1035Label,
IsDNS1123Subdomain, IsValidPortName; and at 26c0309663d6df7426e5ce03835f15c34b1c7399,
staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go: IsLabelKey, IsLabelValue). Which rule each field
takes is pkg/apis/core/validation/validation.go's (a7264f95ffc8b56377da16e83461aa59467ebb3e): a namespace is a
DNS-1123 label (ValidateNamespaceName), a Service's name a DNS-1035 label (ValidateServiceName), a Pod's a DNS-1123
subdomain (ValidatePodName), a Service port's name a DNS-1123 label (validateServicePort), a container's name a
DNS-1123 label, a container port's name and a named targetPort an IANA_SVC_NAME (validateContainerPorts,
ValidatePortNumOrName), labels by ValidateLabels; a Deployment's and a ReplicaSet's name is a DNS-1123 subdomain
(pkg/apis/apps/validation/validation.go at 2dd1588c490775be7cd90d0afc59c6dcef07032a, ValidateDeploymentName), an
EndpointSlice's too and its ports' names DNS-1123 labels (pkg/apis/discovery/validation/validation.go at
006614ef0bd74f44f847e57dc090e99589c244a0, ValidateEndpointSliceName, validatePorts).

The lab's own names (the scenario, nodes, external hosts, load balancers) follow the DNS-1123 label rule too: they
name namespaces of this machine, report rows and files, and appear in the rules the fabric runs.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator


@dataclass(frozen=True)
class Rule:
    """A kind of name: its longest length, the form it must match, and both said in words."""

    title: str  # "DNS-1123 label": what Kubernetes calls it
    longest: int
    form: re.Pattern[str]
    words: str  # what it is made of, for a sentence "... is at most N characters of WORDS"
    chars: str  # every character it may hold

    def problem(self, value: str) -> str | None:
        """Why `value` is not such a name, in words (None when it is one)."""
        if len(value) > self.longest:
            return f"{len(value)} characters is too long"
        if self.form.fullmatch(value):
            return None
        if not value:
            return "it is empty"
        if bad := next((c for c in value if c not in self.chars), None):
            return f"{bad!r} is not allowed"
        return "a character is not allowed where it stands (the start, the end, or beside a '-' or '.')"

    def describe(self, what: str) -> str:
        return f"{what} is at most {self.longest} characters of {self.words} (Kubernetes' {self.title})"


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LOWER = string.ascii_lowercase + string.digits + "-"
_ANY_CASE = string.ascii_letters + string.digits + "-_."
DNS1123_LABEL = Rule(
    "DNS-1123 label",
    63,
    re.compile(_LABEL),
    "lower-case letters, digits and '-', starting and ending with a letter or digit",
    _LOWER,
)
DNS1035_LABEL = Rule(
    "DNS-1035 label",
    63,
    re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?"),
    "lower-case letters, digits and '-', starting with a letter and ending with a letter or digit",
    _LOWER,
)
DNS1123_SUBDOMAIN = Rule(
    "DNS-1123 subdomain",
    253,
    re.compile(rf"{_LABEL}(\.{_LABEL})*"),
    "lower-case letters, digits, '-' and '.', each part between dots starting and ending with a letter or digit",
    _LOWER + ".",
)
# IsValidPortName: [-a-z0-9], at least one letter, no hyphen at either end, no two in a row.
PORT_NAME = Rule(
    "IANA_SVC_NAME",
    15,
    re.compile(r"(?=[-a-z0-9]*[a-z])[a-z0-9]+(-[a-z0-9]+)*"),
    "lower-case letters, digits and '-', with at least one letter, no '-' at either end and no two '-' in a row",
    _LOWER,
)
_KEY_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = Rule(
    "label value",
    63,
    re.compile(rf"({_KEY_NAME})?"),
    "letters, digits, '-', '_' and '.', starting and ending with a letter or digit (or nothing at all)",
    _ANY_CASE,
)
LABEL_KEY_NAME = Rule(
    "label key",
    63,
    re.compile(_KEY_NAME),
    "letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
    _ANY_CASE,
)


def refusal(rule: Rule, what: str, value: str) -> str | None:
    """The whole refusal of a value that is not such a name, or None when it is one."""
    why = rule.problem(value)
    return f"{rule.describe(what)}; {value!r} is not: {why}" if why else None


def label_key_refusal(key: str) -> str | None:
    """A label or annotation key: NAME or PREFIX/NAME, the prefix a DNS-1123 subdomain (IsLabelKey)."""
    prefix, slash, name = key.rpartition("/")
    if key.count("/") > 1:
        return f"a label key is NAME or PREFIX/NAME with one '/'; {key!r} has {key.count('/')}"
    if slash and (why := refusal(DNS1123_SUBDOMAIN, "a label key's prefix (before '/')", prefix)):
        return why
    return refusal(LABEL_KEY_NAME, "a label key's name (after any 'PREFIX/')", name)


def _checked(rule: Rule, what: str, empty: bool = False) -> Callable[[str], str]:
    """A validator of such names; `empty`: "" too (a port's name, where the object has one port)."""

    def check(value: str) -> str:
        if (value or not empty) and (why := refusal(rule, what, value)):
            raise ValueError(why)
        return value

    return check


def _labels(what: str) -> Callable[[dict[str, str]], dict[str, str]]:
    def check(labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            if why := label_key_refusal(key) or refusal(LABEL_VALUE, f"a {what} value", value):
                raise ValueError(f"{key}: {why}")
        return labels

    return check


def _keys(what: str) -> Callable[[dict[str, str]], dict[str, str]]:
    def check(values: dict[str, str]) -> dict[str, str]:
        for key in values:
            if why := label_key_refusal(key):
                raise ValueError(f"{what} {key!r}: {why}")
        return values

    return check


Namespace = Annotated[str, AfterValidator(_checked(DNS1123_LABEL, "a namespace"))]
ServiceName = Annotated[str, AfterValidator(_checked(DNS1035_LABEL, "a Service name"))]
ObjectName = Annotated[
    str, AfterValidator(_checked(DNS1123_SUBDOMAIN, "a Pod, Deployment, ReplicaSet or EndpointSlice name"))
]
ServicePortName = Annotated[str, AfterValidator(_checked(DNS1123_LABEL, "a Service port's name", empty=True))]
EndpointPortName = Annotated[str, AfterValidator(_checked(DNS1123_LABEL, "an EndpointSlice port's name", empty=True))]
ContainerName = Annotated[str, AfterValidator(_checked(DNS1123_LABEL, "a container's name"))]
PortName = Annotated[str, AfterValidator(_checked(PORT_NAME, "a container port's name"))]
TARGET_PORT = _checked(PORT_NAME, "a named targetPort (a container port's name)")
Labels = Annotated[dict[str, str], AfterValidator(_labels("label"))]
Annotations = Annotated[dict[str, str], AfterValidator(_keys("annotation key"))]
LabName = Annotated[
    str,
    AfterValidator(_checked(DNS1123_LABEL, "a name of the lab's own (scenario, node, external host, load balancer)")),
]
