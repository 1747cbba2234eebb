"""The blocks of a pod network no node's podCIDR takes, for nodes without one: found in one pass over the taken
blocks sorted, where testing each candidate against every taken block grew with nodes × blocks (thousands of nodes
without a podCIDR, each trying blocks against every other node's)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def free_blocks(network: Network, prefixlen: int, taken: Iterable[Network]) -> Iterator[Network]:
    """`network`'s /`prefixlen` blocks in address order, each sharing no address with any of `taken` (of the same
    family as `network`)."""
    spans = sorted((int(t.network_address), int(t.broadcast_address)) for t in taken)
    k = 0  # the spans before k end before the current block; blocks only move up, so they are never needed again
    for block in network.subnets(new_prefix=prefixlen):
        start, end = int(block.network_address), int(block.broadcast_address)
        while k < len(spans) and spans[k][1] < start:
            k += 1
        # spans[k] ends at or after the block's start and starts first of the rest: some span shares an address
        # with the block exactly when it starts at or before the block's end.
        if k == len(spans) or spans[k][0] > end:
            yield block
