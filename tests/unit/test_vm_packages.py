"""lab vm: which of a Debian suite's packages hold its stock kernel, read from the suite's Packages index."""

from __future__ import annotations

import pytest

from lab.vm import VmError
from lab.vm.apt import depends_names, kernel_packages

# trixie-backports' amd64 index (2026-11), the stanzas of the kernel's chain, fields trimmed: 7.x splits the image.
TRIXIE_BACKPORTS = """\
Package: linux-image-amd64
Version: 7.3.4-1~bpo13+1
Depends: linux-base-amd64 (= 7.3.4-1~bpo13+1), linux-image-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), \
linux-modules-amd64 (= 7.3.4-1~bpo13+1)

Package: linux-image-7.3.4+deb13-amd64
Version: 7.3.4-1~bpo13+1
Pre-Depends: linux-base (>= 4.17~)
Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.3.4+deb13-amd64 \
(= 7.3.4-1~bpo13+1), linux-binary-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), linux-modules-7.3.4+deb13-amd64 \
(= 7.3.4-1~bpo13+1)

Package: linux-binary-7.3.4+deb13-amd64
Version: 7.3.4-1~bpo13+1
Depends: linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)

Package: linux-modules-7.3.4+deb13-amd64
Version: 7.3.4-1~bpo13+1
Depends: kmod, linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)

Package: linux-base-7.3.4+deb13-amd64
Version: 7.3.4-1~bpo13+1

Package: linux-base
Version: 4.17~bpo13+1
"""

# trixie's: before the split, the image package holds the kernel and its modules.
TRIXIE = """\
Package: linux-image-amd64
Version: 6.12.117-1
Depends: linux-image-6.12.117+deb13-amd64 (= 6.12.117-1)

Package: linux-image-6.12.117+deb13-amd64
Version: 6.12.117-1
Pre-Depends: linux-base (>= 4.12~)
Depends: kmod, initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool
"""


def _index(text: str):
    """`show(name)` over a Packages index text, as apt-cache show answers it."""
    stanzas = {}
    for stanza in text.split("\n\n"):
        name = stanza.splitlines()[0].removeprefix("Package: ")
        stanzas[name] = stanza

    def show(name: str) -> str:
        if name not in stanzas:
            raise VmError(f"apt-cache show {name} failed (exit 100)")
        return stanzas[name]

    return show


def test_a_split_7x_kernel_is_its_binary_modules_and_base_packages():
    found = kernel_packages(_index(TRIXIE_BACKPORTS), "linux-image-amd64")
    assert found.image == "linux-image-7.3.4+deb13-amd64" and found.release == "7.3.4+deb13-amd64"
    assert found.payload == (
        "linux-base-7.3.4+deb13-amd64",
        "linux-binary-7.3.4+deb13-amd64",
        "linux-modules-7.3.4+deb13-amd64",
    )


def test_a_kernel_before_the_split_is_its_image_package():
    found = kernel_packages(_index(TRIXIE), "linux-image-amd64")
    assert found.payload == ("linux-image-6.12.117+deb13-amd64",) and found.release == "6.12.117+deb13-amd64"


def test_a_dependency_reached_only_through_another_is_fetched():
    # linux-base-<release> named by linux-binary alone, not by the image: still part of the kernel.
    text = TRIXIE_BACKPORTS.replace("linux-base-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1), linux-binary", "linux-binary")
    assert "linux-base-7.3.4+deb13-amd64" not in text.split("\n\n")[1]
    found = kernel_packages(_index(text), "linux-image-amd64")
    assert "linux-base-7.3.4+deb13-amd64" in found.payload


def test_a_split_kernel_without_its_modules_package_is_refused_in_words():
    text = TRIXIE_BACKPORTS.replace(", linux-modules-7.3.4+deb13-amd64 (= 7.3.4-1~bpo13+1)\n", "\n")
    with pytest.raises(VmError, match=r"needs linux-modules-7\.3\.4\+deb13-amd64$"):
        kernel_packages(_index(text), "linux-image-amd64")


def test_a_meta_package_naming_no_image_is_refused_in_words():
    text = "Package: linux-image-amd64\nVersion: 7.3.4-1\nDepends: linux-base-amd64 (= 7.3.4-1)\n"
    with pytest.raises(VmError, match="linux-image-amd64 names no linux-image-<version>-amd64 package"):
        kernel_packages(_index(text), "linux-image-amd64")


def test_depends_takes_the_first_alternative_and_drops_versions_and_qualifiers():
    stanza = "Package: x\nDepends: dracut | initramfs-tools (>= 0.120), kmod:any, linux-base-7.3.4+deb13-amd64 (= 1)\n"
    assert depends_names(stanza) == ["dracut", "kmod", "linux-base-7.3.4+deb13-amd64"]
    assert depends_names("Package: x\n") == []
