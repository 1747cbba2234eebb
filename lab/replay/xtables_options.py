"""The options iptables reads in a rule, for the review of a dump (lab.replay.review).

iptables parses a rule's words with getopt_long, which takes any unambiguous abbreviation of a long option (`--jum`
for `--jump`), `--option=value`, and short options joined to each other and to their value (`-vjLED`); iptables-save
writes every option in full, each option and each value a word of its own. To tell an abbreviation from an option
written in full, the review needs every long option's name: iptables' own and those of each extension it ships, read
from its source (netfilter's iptables, as mirrored in sailfishos-mirror/iptables): iptables/iptables.c's
`original_opts` and the option table of each extensions/lib{xt,ipt,ip6t}_*.c, at v1.4.21 (482c6d37), v1.6.2
(c16bdec1), v1.8.0 (6c2118c3), v1.8.9 (11407d91), v1.8.11 (0506bea1) and 5ef190fb (May 2026). A name any of them
knows is here; one that only begins such a name is an abbreviation.
"""

from __future__ import annotations

# iptables/xshared.h IPT_OPTSTRING at v1.8.9 (11407d91): each short option's letter, followed by `:` if it takes a
# value (the rest of its word, else the next word) or `::` if it takes one only joined to it. The leading `-:` are
# getopt's modes (options and other words in order; errors reported by iptables), not options.
SHORT_OPTSTRING = "-:A:C:D:E:F::I:L::M:N:P:VX::Z::c:d:i:j:o:p:s:t:R:S::W::46bfg:h::m:nvw::x"

# iptables' own long options (iptables.c original_opts).
_OWN = """
append check delete delete-chain destination dst exact flush goto help in-interface insert ipv4 ipv6 jump
line-numbers list list-rules match modprobe new-chain numeric out-interface policy protocol rename-chain replace
set-counters source src table verbose version wait wait-interval zero
"""

# The long options of the extensions (matches and targets).
_EXTENSIONS = """
accept-local add-set ahlen ahres ahspi alarm algo and-mark and-tos bytecode bytes-eq bytes-gt bytes-lt cgroup
checksum-fill chunk-types clamp-mss-to-pmtu cluster-hash-seed cluster-local-node cluster-local-nodemask
cluster-total-nodes clustermac cmd-owner comment compres connbytes connbytes-dir connbytes-mode connlimit-above
connlimit-daddr connlimit-mask connlimit-saddr connlimit-upto contiguous cpu ctdir ctevents ctexpire ctmask
ctorigdst ctorigdstport ctorigsrc ctorigsrcport ctproto ctrepldst ctrepldstport ctreplsrc ctreplsrcport ctstate
ctstatus datestart datestop dccp-option dccp-types del-set destination-port destination-ports dir dport dports dscp
dscp-class dst-group dst-len dst-opts dst-pfx dst-range dst-type ecn ecn-ip-ect ecn-tcp-cwr ecn-tcp-ece
ecn-tcp-remove espspi every exist expevents fragfirst fragid fraglast fraglen fragmore fragres from gateway genre
gid-owner hash-init hashlimit hashlimit-above hashlimit-burst hashlimit-dstmask hashlimit-htable-expire
hashlimit-htable-gcinterval hashlimit-htable-max hashlimit-htable-size hashlimit-mode hashlimit-name
hashlimit-rate-interval hashlimit-rate-match hashlimit-srcmask hashlimit-upto hashmode hbh-len hbh-opts header
helper hex-string hitcount hl hl-dec hl-eq hl-gt hl-inc hl-lt hl-set hmark-dport hmark-dport-mask hmark-dst-prefix
hmark-mod hmark-offset hmark-proto-mask hmark-rnd hmark-spi hmark-spi-mask hmark-sport hmark-sport-mask
hmark-src-prefix hmark-tuple icase icmp-type icmpv6-type invert ipcompspi ipvs kerneltz label led-always-blink
led-delay led-trigger-id left-shift-mark length limit limit-burst limit-iface-in limit-iface-out local-node localtz
log log-ip-options log-level log-macdecode log-prefix log-tcp-options log-tcp-sequence log-uid loose mac-source
mangle-ip-d mangle-ip-s mangle-mac-d mangle-mac-s mangle-target map-mark map-prio map-queue map-set mark mask
match-set mh-type mode monthdays mss name new next nfacct-name nflog-group nflog-prefix nflog-range nflog-size
nflog-threshold nfmask nodst notrack nowildcard object-pinned oif on-ip on-port or-mark or-tos packet packets-eq
packets-gt packets-lt path persistent physdev-in physdev-is-bridged physdev-is-in physdev-is-out physdev-out
pid-owner pkt-type pol ports probability proto queue-balance queue-bypass queue-cpu-fanout queue-num quota random
random-fully rateest rateest-bps rateest-bps1 rateest-bps2 rateest-delta rateest-eq rateest-ewmalog rateest-gt
rateest-interval rateest-lt rateest-name rateest-pps rateest-pps1 rateest-pps2 rateest1 rateest2 rcheck rdest realm
reap reject-with remove reqid restore restore-mark restore-skmark return-nomatch right-shift-mark rsource rt-0-addrs
rt-0-not-strict rt-0-res rt-len rt-segsleft rt-type rttl sack-perm save save-mark seconds selctx set set-class
set-dscp set-dscp-class set-mark set-mss set-tos set-xmark sid-owner socket-exists soft source-port source-ports spi
sport sports src-group src-pfx src-range src-type srh-hdr-len-eq srh-hdr-len-gt srh-hdr-len-lt srh-last-entry-eq
srh-last-entry-gt srh-last-entry-lt srh-lsid srh-next-hdr srh-nsid srh-psid srh-segs-left-eq srh-segs-left-gt
srh-segs-left-lt srh-tag state strict string strip-options suppl-groups syn tcp-flags tcp-option timeout timestamp
timestart timestop to to-destination to-ports to-source tos total-nodes tproxy-mark transparent ttl ttl-dec ttl-eq
ttl-gt ttl-inc ttl-lt ttl-set tunnel-dst tunnel-src type u32 uid-owner ulog-cprange ulog-nlgroup ulog-prefix
ulog-qthreshold update update-counters update-subcounters utc vaddr validmark vdir vmethod vport vportctl vproto
weekdays wscale xor-mark xor-tos zone zone-orig zone-reply
"""

OWN_OPTIONS = frozenset(_OWN.split())
LONG_OPTIONS = OWN_OPTIONS | frozenset(_EXTENSIONS.split())
