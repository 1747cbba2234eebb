"""Words that several commands' --help share: what --variant and --matrix take, and how an exit status reads."""

from __future__ import annotations

# Completes "run only the variants ...", "build the first variant ...".
VARIANT = (
    "whose matrix value of KEY is VALUE (e.g. proxyMode=ipvs, kubeVersion=1.31, masqueradeAll=true); repeat it for "
    "other keys, each key once"
)
MATRIX = "add an axis to the matrix or replace one: KEY=V1,V2, e.g. proxyMode=iptables,nftables; each key once"
# What every command that builds namespaces does when it is stopped: they are removed first.
STOPPED = ((130, "interrupted (Ctrl-C)"), (143, "terminated (SIGTERM)"))


def exit_codes(*codes: tuple[int, str]) -> str:
    """An epilog listing a command's exit statuses."""
    return "exit status: " + "; ".join(f"{code} {meaning}" for code, meaning in codes) + "."
