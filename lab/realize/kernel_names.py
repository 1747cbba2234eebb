"""The kernel's names for the lab's actors: a Kubernetes name is up to 253 characters (a pod's), an interface name
at most 15 (IFNAMSIZ, with its NUL) and a namespace's file name at most 255. Each actor keeps its own name where it
fits, and otherwise gets a short one made unique by a digest of the whole name; users only ever see the
Kubernetes names (reports, errors), never these."""

from __future__ import annotations

import hashlib
import re

IFNAME_MAX = 15  # IFNAMSIZ - 1
# Room for the actor's part of a namespace name after "lab-XXXXXX-" (NAME_MAX 255 is /run/netns's limit; kept
# well below, so that a path built from it stays readable).
NETNS_ROOM = 200
# What an interface name may hold as it is (a '.' would split a sysctl path net.ipv4.conf.IFNAME.x, a '/' a path).
_PLAIN = re.compile(r"[a-z0-9-]+")
# '_' is in no name the scenario may give (Kubernetes names and the lab's own have none): a shortened name, or a
# pod's NAMESPACE/NAME, can never equal a name a user wrote.
_MARK = "_"
# The stem of an actor's port on a bridge of the lab's (the underlay's br0 in the fabric, a router's lan0): a '-'
# is in no device name the kernel or the lab gives there beside the ports (lo, br0, lan0, eth0, a fallback
# tunnel device such as tunl0, sit0 or gre0), so a node named br0 or a host named lan0 meets none of them.
PORT_STEM = "to-"


def _digest(name: str, length: int) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:length]


def netns_part(actor: str) -> str:
    """The actor's part of its namespace's name: the actor's name, a pod's NAMESPACE/NAME as NAMESPACE_NAME, and
    any longer than NETNS_ROOM cut, with a digest of the whole."""
    readable = actor.replace("/", _MARK)
    if len(readable) <= NETNS_ROOM:
        return readable
    return f"{readable[: NETNS_ROOM - 11]}{_MARK}{_digest(actor, 10)}"


def ifname(name: str, stem: str = "") -> str:
    """An interface named for an actor: `stem` + its name when that fits as it is, else the start of the name,
    '_' and a digest of the whole (15 characters)."""
    whole = f"{stem}{name}"
    if len(whole) <= IFNAME_MAX and _PLAIN.fullmatch(name):
        return whole
    keep = IFNAME_MAX - 6
    return f"{whole[:keep].replace('/', _MARK).replace('.', _MARK)}{_MARK}{_digest(name, 5)}"


def bridge_port(actor: str) -> str:
    """The actor's port on the bridge it hangs off (its veth's other end): to-NAME, or the digest form."""
    return ifname(actor, PORT_STEM)
