"""apt: a private apt configuration that downloads one Debian release's packages without touching the machine's apt.

The machine's own sources, lists, cache and dpkg status stay as they are: every directory apt would write to
points under the given root, and the machine's sources only tell which Debian mirror this machine already uses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from lab.vm.errors import VmError

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
_CODENAMES = ("buster", "bullseye", "bookworm", "trixie", "forky", "sid", "stable", "testing", "unstable")


def _is_debian_suite(suite: str) -> bool:
    return suite.split("-", 1)[0] in _CODENAMES and not suite.endswith("-security")


def _one_line_entries(text: str) -> list[tuple[list[str], list[str]]]:
    """`deb [options] URI SUITE COMPONENTS...` lines of a .list file."""
    entries = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            entries.append(([words[1]], [words[2]]))
    return entries


def _deb822_entries(text: str) -> list[tuple[list[str], list[str]]]:
    """Enabled `Types: deb` stanzas of a .sources file."""
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if not line.startswith("#") and ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
            entries.append((fields.get("uris", "").split(), fields.get("suites", "").split()))
    return entries


def _sources_entries(text: str) -> list[tuple[list[str], list[str]]]:
    """(uris, suites) of every enabled `deb` entry, whichever of the two formats the text is in."""
    return _one_line_entries(text) + _deb822_entries(text)


def mirror_from_sources(texts: Iterable[str]) -> str | None:
    """The first Debian archive URI (not the security archive) the given apt sources use."""
    for text in texts:
        for uris, suites in _sources_entries(text):
            if any(_is_debian_suite(s) for s in suites):
                for uri in uris:
                    if not uri.rstrip("/").endswith("-security"):
                        return uri.rstrip("/")
    return None


def machine_mirror(etc: Path = Path("/etc/apt")) -> str | None:
    """The Debian mirror this machine's apt already uses ($LAB_DEBIAN_MIRROR overrides it)."""
    if override := os.environ.get("LAB_DEBIAN_MIRROR"):
        return override.rstrip("/")
    files = [etc / "sources.list"] + sorted((etc / "sources.list.d").glob("*.list"))
    files += sorted((etc / "sources.list.d").glob("*.sources"))
    texts = []
    for path in files:
        try:
            texts.append(path.read_text())
        except OSError:
            continue
    return mirror_from_sources(texts)


@dataclass(frozen=True)
class PrivateApt:
    """apt-get/apt-cache options confined to `root`, for one suite of one mirror."""

    root: Path
    mirror: str
    suite: str
    keyring: Path | None = KEYRING

    def sources_text(self) -> str:
        signed = f"[signed-by={self.keyring}] " if self.keyring else ""
        return f"deb {signed}{self.mirror} {self.suite} main\n"

    def options(self) -> list[str]:
        settings = {
            "Dir::Etc::sourcelist": self.root / "sources.list",
            # An empty directory of our own: the machine's sources.list.d must not add its entries.
            "Dir::Etc::sourceparts": self.root / "sources.list.d",
            "Dir::Etc::preferences": self.root / "preferences",
            "Dir::Etc::preferencesparts": self.root / "preferences.d",
            "Dir::State::Lists": self.root / "lists",
            "Dir::State::status": self.root / "status",
            "Dir::State::extended_states": self.root / "extended_states",
            "Dir::Cache": self.root / "cache",
            "APT::Architecture": "amd64",
            "APT::Architectures": "amd64",
            "Acquire::Languages": "none",
        }
        if os.geteuid() == 0:
            # The _apt sandbox user cannot enter root's home, where the cache usually is.
            settings["APT::Sandbox::User"] = "root"
        return [arg for key, value in settings.items() for arg in ("-o", f"{key}={value}")]

    def prepare(self) -> None:
        """Create the private directories and files apt expects."""
        for sub in ("sources.list.d", "preferences.d", "lists/partial", "cache/archives/partial"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "sources.list").write_text(self.sources_text())
        (self.root / "status").touch()


def meta_dependency(show_output: str) -> str | None:
    """The concrete image package a `linux-image-amd64` meta package depends on, from `apt-cache show`."""
    for line in show_output.splitlines():
        if line.startswith("Depends:") and (match := re.search(r"\b(linux-image-\d\S*-amd64)\b", line)):
            return match.group(1)
    return None


def stanza_field(stanza: str, name: str) -> str:
    """One field of a package's stanza (`apt-cache show` or a Packages index), "" when it has none."""
    for line in stanza.splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    return ""


def depends_names(stanza: str) -> list[str]:
    """The package names a stanza's Depends line requires (the first of each set of alternatives)."""
    names = []
    for clause in stanza_field(stanza, "Depends").split(","):
        if words := clause.split("|", 1)[0].split():
            names.append(words[0].split(":", 1)[0])  # an architecture qualifier (name:any) is not the name
    return names


@dataclass(frozen=True)
class KernelPackages:
    """What a release's kernel is made of: its image package, its release (`uname -r`) and the packages that hold
    its files (the image package itself before 7.x; linux-binary-*, linux-modules-* and linux-base-* from 7.x)."""

    image: str
    release: str
    payload: tuple[str, ...]


def kernel_packages(show: Callable[[str], str], meta: str) -> KernelPackages:
    """Follow the meta package to the packages holding the kernel's files. `show(name)` gives a package's stanza.

    Debian's 7.x kernels split linux-image-<release> into a package that only depends on linux-binary-<release>
    (the signed vmlinuz), linux-modules-<release> and linux-base-<release> (config, System.map): every package of
    that release the image package needs, transitively, is fetched. Before the split the image holds them all."""
    image = meta_dependency(show(meta))
    if image is None:
        raise VmError(f"{meta} names no linux-image-<version>-amd64 package")
    release = image.removeprefix("linux-image-")
    payload: list[str] = []
    todo = _same_release(depends_names(show(image)), release)
    while todo:
        name = todo.pop(0)
        if name not in payload:
            payload.append(name)
            todo += _same_release(depends_names(show(name)), release)
    if not payload:
        return KernelPackages(image, release, (image,))
    kinds = {name.removesuffix(f"-{release}") for name in payload}
    if missing := {"linux-binary", "linux-modules"} - kinds:
        raise VmError(
            f"{image} depends on {', '.join(payload)}: a kernel split into packages needs "
            + " and ".join(f"{kind}-{release}" for kind in sorted(missing))
        )
    return KernelPackages(image, release, tuple(sorted(payload)))


def _same_release(names: list[str], release: str) -> list[str]:
    """The linux-*-<release> packages among names: the kernel's own, not linux-base (>= 4.17~) and the like."""
    return [name for name in names if name.startswith("linux-") and name.endswith(f"-{release}")]
