"""Who answered the client's ARP for the address a probe sent to, read from the captures of the exchange itself.

A layer 2 VIP (MetalLB's L2 mode, kube-vip's ARP mode) is answered by the announcing node's speaker and, in ipvs
mode without strictARP, by the kernel of every node that binds it on kube-ipvs0 (arp_ignore=0 answers for any
local address, on any interface): the ARP flux. The client's neighbour entry takes one of the answers, and its
traffic enters that node; another run, whose answers come in another order, may enter another. So every answer is
shown, each with the node a capture saw send it (the reply leaving its eth0, which the node captures watch), and
the words say when more than one node answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, ip_address

from lab.install.speaker import parse_arp
from lab.probe.capture import Frame
from lab.probe.observation import ArpAnswer


def arp_answers(frames: Sequence[Frame], nodes: Iterable[str], address: str) -> tuple[ArpAnswer, ...]:
    """The ARP replies for `address` that reached an actor other than a node (the client, or the router it sits
    behind), in the order they came, each with the node seen sending it. None for an IPv6 address (NDP, not
    ARP) or a destination that is no address."""
    try:
        target = ip_address(address)
    except ValueError:
        return ()
    if not isinstance(target, IPv4Address):
        return ()
    node_names = set(nodes)
    senders: dict[bytes, str] = {}
    received: list[bytes] = []
    for frame in frames:
        message = parse_arp(frame.data)
        if message is None or not message.is_reply or message.sender_ip != target.packed:
            continue
        if frame.outgoing:
            senders.setdefault(message.sender_mac, frame.actor)
        elif frame.actor not in node_names:
            received.append(message.sender_mac)
    return tuple(ArpAnswer(address, mac_text(mac), senders.get(mac)) for mac in received)


def mac_text(mac: bytes) -> str:
    return ":".join(f"{octet:02x}" for octet in mac)


def answer_text(answer: ArpAnswer) -> str:
    """`192.168.56.240 is-at 02:…:0b from node3` (or `from no node a capture saw`)."""
    sender = answer.node or "no node a capture saw send it"
    return f"{answer.address} is-at {answer.mac} from {sender}"


def answering_nodes(answers: Sequence[ArpAnswer]) -> list[str]:
    """The nodes (a MAC for an answer no capture saw leave) that answered, in the order their first answer came."""
    return list(dict.fromkeys(a.node or a.mac for a in answers))


def entry_warning(answers: Sequence[ArpAnswer], entry: str | None) -> str:
    """Words for a result where more than one node answered ARP: which node the traffic entered, and that another
    run may enter another; "" when one node answered or none did."""
    answering = answering_nodes(answers)
    if len(answering) < 2:
        return ""
    address = answers[0].address
    entered = [e for e in (entry or "").split("|") if e]
    others = [n for n in answering if n not in entered]
    if not entered:
        return f"{_and(answering)} answered ARP for {address}: a run enters whichever answer its client took"
    if not others:
        return (
            f"entered {_and(entered)}, each of which answered ARP for {address}: a run enters whichever answer"
            " its client took"
        )
    return f"entered {_and(entered)}; {_and(others)} also answered ARP for {address}: another run may enter there"


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
