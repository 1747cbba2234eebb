"""Debian's 7.x kernels under lab vm: fetched from trixie-backports, where linux-image-<release> is split into
linux-binary-, linux-modules- and linux-base-<release> packages, booted, and their ICMPv6 budget set against
Debian 13's 6.12: torvalds/linux 0201eedb69b2 ("ipv6: icmp: remove obsolete code in icmpv6_xrlim_allow()") made
net.ipv6.icmp.ratelimit's default 100 ms instead of 1000 and stopped dividing it by (128 - prefix length) / 32
for a host reached through a route wider than a /128 (by 4 through a /64).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.vm import GUEST_MARKS

from lab.vm import run_in_vm

REPO = Path(__file__).resolve().parents[2]

pytestmark = GUEST_MARKS

# Two namespaces of the guest on a /64; b's budget is one error per 10 s. Six datagrams to a closed port at once
# spend the burst of 6; the seventh goes 3 s later: a kernel that divides the period by 4 for the /64 (2.5 s) has
# refilled one error by then, a kernel that does not (10 s) has not.
BUDGET = r"""
set -e
ip netns add lab-k7-a; ip netns add lab-k7-b
ip link add va netns lab-k7-a type veth peer name vb netns lab-k7-b
ip -n lab-k7-a addr add fd00:77::1/64 dev va nodad; ip -n lab-k7-b addr add fd00:77::2/64 dev vb nodad
ip -n lab-k7-a link set va up; ip -n lab-k7-b link set vb up
echo "default $(ip netns exec lab-k7-b sysctl -n net.ipv6.icmp.ratelimit)"
ip netns exec lab-k7-b sysctl -qw net.ipv6.icmp.ratelimit=10000
sleep 1
ip netns exec lab-k7-a python3 -c '
import socket, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for _ in range(6):
    s.sendto(b"x", ("fd00:77::2", 9))
time.sleep(3)
s.sendto(b"x", ("fd00:77::2", 9))
time.sleep(0.5)
'
ip netns exec lab-k7-b awk '$1 ~ /^Icmp6Out(DestUnreachs|RateLimitHost)$/ {print $1, $2}' /proc/net/snmp6
"""


def _said(output: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in output.splitlines() if line.count(" ") == 1)


@pytest.mark.parametrize(
    ("kernel", "major", "expected"),
    [
        # 6.12: default 1000 ms; the /64 divides 10 s by 4, so the seventh error 3 s later is sent.
        ("debian-13", "6.", {"default": "1000", "Icmp6OutDestUnreachs": "7", "Icmp6OutRateLimitHost": "0"}),
        # 7.x: default 100 ms; 10 s whatever the prefix, so the seventh is withheld.
        ("debian-13-backports", "7.", {"default": "100", "Icmp6OutDestUnreachs": "6", "Icmp6OutRateLimitHost": "1"}),
    ],
)
def test_the_icmpv6_budget_of_a_new_namespace(kernel, major, expected):
    result = run_in_vm(["sh", "-c", BUDGET], cwd=REPO, kernel=kernel, timeout=600)
    assert result.exit_status == 0, result.output
    assert result.kernel_release.startswith(major), result.kernel_release
    assert _said(result.output) == expected, result.output
