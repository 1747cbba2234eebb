"""cluster.iptablesBackend: wrapper — the backend kube-proxy's image's iptables-wrapper chooses when kube-proxy starts,
from what the node's tables hold (lab/describe/resolve/node_tables.py), as the wrapper of that release's image does.

Which wrapper each image carries (READ unless marked):
- distroless-iptables, kube-proxy's image from 1.25 (kubernetes/kubernetes#111060): every Dockerfile, from the first
  (kubernetes/release images/build/distroless-iptables/distroless/Dockerfile at
  661bdbf063163103b4029012835df221aba792ea) to distroless-bookworm/Dockerfile at
  f618b2a308bc76e90e987e45ab17c85778dd5993, installs the `v2` tag's iptables-wrapper-installer.sh of
  kubernetes-sigs/iptables-wrappers (e139a115350974aac8a82ec4b815d2845f86997e): kubelet's chains
  (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY) in iptables-nft-save -t mangle (and ip6tables') → nft; else in
  iptables-legacy-save's whole output (and ip6tables') → legacy; else legacy only when it holds more rules (`^-`
  lines) than nft, nft otherwise. The later Go wrapper (pkg/xtables/detect.go at
  c80f8abe852c6f64bfa8d1404bdbeaf24f67bc06) checks the chains alike but falls back to nft without counting; no
  kube-proxy image carries it at f618b2a3.
- debian-iptables bullseye, 1.23 and 1.24 (variants.yaml at c05a4f1cf1f35bdf6bc2420656e8df83371d746b: "Debian 11 -
  Kubernetes 1.23 and newer"): its own iptables-wrapper (images/build/debian-iptables/bullseye/iptables-wrapper at
  31530bf54df0322e8f112affdb15cb65e6f9e2e3) counts rules alone: legacy when it holds as many or more.
- debian-iptables buster, 1.19 – 1.22 ("Debian 10 - Kubernetes 1.22 and older"): the same from buster-v1.6.2
  (30c908554d3e6a877814daa82a2eb60a8924d7ba, built by 19d1cd99f86ee057722e97243c085e7de159e6d2, June 2021); before,
  legacy as soon as legacy holds 10 rules (images/build/debian-iptables/iptables-wrapper at
  7b8fe59861db5e71de5b9503cb13d2f8d86e97ab, copied from kubernetes/kubernetes). Which patch releases of 1.19 – 1.22
  carry which is INFERRED only from those dates, so where the two disagree the lab says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lab.describe.releases import kube_proxy_image
from lab.describe.resolve.node_tables import BackendTables, Unread

WRAPPER = "wrapper"
KUBELET_CHAINS = ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY")
Backend = Literal["nft", "legacy"]


@dataclass(frozen=True)
class Wrapper:
    """One iptables-wrapper as an image carried it."""

    image: str
    kubelet_chains_first: bool  # iptables-wrappers v2: kubelet's chains decide before any count
    legacy_on_tie: bool  # the count's tie goes to legacy (debian-iptables), else to nft (v2)
    legacy_at: int = 0  # legacy as soon as it holds this many rules (0: no such shortcut)


V2 = Wrapper("distroless-iptables, iptables-wrappers v2", kubelet_chains_first=True, legacy_on_tie=False)
BULLSEYE = Wrapper("debian-iptables bullseye", kubelet_chains_first=False, legacy_on_tie=True)
BUSTER = Wrapper("debian-iptables buster from v1.6.2", kubelet_chains_first=False, legacy_on_tie=True)
EARLY_BUSTER = Wrapper("debian-iptables buster before v1.6.2", False, legacy_on_tie=True, legacy_at=10)
BUSTER_ALIKE = "debian-iptables buster, before and from v1.6.2 alike"  # the two buster wrappers, agreeing


# The wrappers each image carried (two where its patch releases' images changed wrapper), by kube_proxy_image.
WRAPPERS = {
    "distroless-iptables": (V2,),
    "debian-iptables bullseye": (BULLSEYE,),
    "debian-iptables buster": (EARLY_BUSTER, BUSTER),
}


@dataclass(frozen=True)
class Choice:
    backend: Backend
    why: str


class Unknowable(ValueError):
    """The wrapper's choice rests on what the lab cannot read: the field to name and why."""

    def __init__(self, field: tuple[str, ...], why: str) -> None:
        super().__init__(why)
        self.field = field


def choose_backend(kube_version: str, legacy: BackendTables, nft: BackendTables) -> Choice:
    """The backend kube-proxy's image's wrapper picks on a node whose tables hold `legacy` and `nft`."""
    choices = [(wrapper, _choice(wrapper, legacy, nft)) for wrapper in WRAPPERS[kube_proxy_image(kube_version)]]
    if len({choice.backend for _, choice in choices}) > 1:
        said = "; ".join(f"{wrapper.image}: {choice.why}" for wrapper, choice in choices)
        raise Unknowable(
            ("cluster", "iptablesBackend"),
            f"kube-proxy {kube_version}'s images carried two iptables-wrappers that choose differently here ({said}),"
            " and which patch release carries which is not known to the lab: write iptablesBackend nft or legacy",
        )
    images = choices[0][0].image if len(choices) == 1 else BUSTER_ALIKE
    choice = choices[-1][1]
    return Choice(choice.backend, f"iptables-wrapper of kube-proxy {kube_version}'s image ({images}): {choice.why}")


def _choice(wrapper: Wrapper, legacy: BackendTables, nft: BackendTables) -> Choice:
    """One wrapper's choice, said as what it found."""
    _readable(nft.unread, legacy.unread)
    if wrapper.kubelet_chains_first:
        if found := _kubelet_chain(nft, {"mangle"}):
            _readable(nft.mangle_unsure)
            return Choice("nft", f"{found[1]} in iptables-nft's mangle table → nft")
        if found := _kubelet_chain(legacy, None):
            return Choice("legacy", f"{found[1]} in iptables-legacy's {found[0]} table → legacy")
    _readable(nft.uncounted, legacy.uncounted)
    none = "no KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY chain; " if wrapper.kubelet_chains_first else ""
    counts = (
        f"{none}iptables-legacy holds {legacy.rules} rule{'' if legacy.rules == 1 else 's'}, iptables-nft {nft.rules}"
    )
    if wrapper.legacy_at and legacy.rules >= wrapper.legacy_at:
        return Choice("legacy", f"{counts} → legacy (it holds {wrapper.legacy_at} or more)")
    tie = "as many rules or more" if wrapper.legacy_on_tie else "more rules"
    if legacy.rules > nft.rules or (wrapper.legacy_on_tie and legacy.rules == nft.rules):
        return Choice("legacy", f"{counts} → legacy ({tie})")
    return Choice("nft", f"{counts} → nft (legacy only with {tie})")


def _readable(*parts: Unread | None) -> None:
    for part in parts:
        if part:
            raise Unknowable(part.field, f"iptables-wrapper's choice reads the host's rules, and {part.why}")


def _kubelet_chain(tables: BackendTables, only: set[str] | None) -> tuple[str, str] | None:
    """The first (table, chain) whose name iptables-wrapper v2's `grep -E '^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY)'`
    matches (a prefix), in the tables it reads."""
    found = sorted(
        (table, chain)
        for table, chain in tables.chains
        if chain.startswith(KUBELET_CHAINS) and (only is None or table in only)
    )
    return found[0] if found else None
