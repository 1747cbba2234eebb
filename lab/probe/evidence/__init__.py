"""Evidence: which rules a probe's packets met, read from the kernel, for probes and replay alike.

Each namespace whose rules matter gets one Evidence (base.py): the kernel's nftables trace (nftrace.py) for
kube-proxy's nftables mode, the same trace named the iptables way for iptables-nft (xtrace.py), and packet
counters (counters.py) for iptables-legacy and ebtables, which have no trace.
"""
