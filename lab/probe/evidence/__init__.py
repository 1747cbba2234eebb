"""Evidence: which rules a probe's packets met, read from the kernel, for probes and replay alike.

Each namespace whose rules matter gets one Evidence (base.py): iptables' packet counters (counters.py)
where the rules keep them, or the kernel's nftables trace (nftrace.py) where they do not.
"""
