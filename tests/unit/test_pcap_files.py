"""`lab run --pcap DIR`: DIR is checked before anything is built, and captures never follow a symlink they did
not make (root writes them: a symlink planted in DIR must not turn into a write elsewhere)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.probe.capture import CaptureError, Frame, pcap_dir, write_pcaps

REPO = Path(__file__).resolve().parents[2]
# An Ethernet frame: broadcast destination, some source, ARP ethertype, padding.
FRAME = Frame("node1", "eth0", False, 1.5, bytes.fromhex("ffffffffffff0200000000010806") + bytes(46))


def test_a_missing_directory_is_made_and_its_real_path_returned(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")  # a symlink above DIR is fine: only DIR itself is checked
    got = pcap_dir(str(tmp_path / "via" / "new" / "dir"))
    assert got == tmp_path.resolve() / "real" / "new" / "dir" and got.is_dir()


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("/dev/null", "/dev/null is not a directory"),
        ("/proc/nope", "cannot make directory /proc/nope: "),
        ("/proc", "cannot write in /proc"),
    ],
)
def test_what_is_not_a_writable_directory_is_refused(where, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        pcap_dir(where)


def test_a_symlink_as_dir_is_refused(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(argparse.ArgumentTypeError, match="is a symlink"):
        pcap_dir(str(tmp_path / "link"))


@pytest.mark.parametrize("where", ["/proc/nope", "/dev/null"])
def test_lab_run_names_the_flag_before_building_anything(where):
    done = subprocess.run(
        [sys.executable, "-m", "lab", "run", "--pcap", where, "topologies/hairpin.yaml"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 2 and not done.stdout
    assert "argument --pcap:" in done.stderr and "Traceback" not in done.stderr


def test_captures_are_written_and_an_earlier_one_replaced(tmp_path):
    directory = tmp_path / "scenario" / "variant" / "probe"
    directory.mkdir(parents=True)
    (directory / "node1-eth0.pcap").write_text("an earlier run's capture")
    assert write_pcaps([FRAME], directory) == [directory / "node1-eth0.pcap"]
    data = (directory / "node1-eth0.pcap").read_bytes()
    assert data[:4] == bytes.fromhex("d4c3b2a1") and data.endswith(FRAME.data)  # pcap magic; the frame as sent


def test_a_symlink_planted_where_a_capture_goes_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    directory = tmp_path / "captures"
    directory.mkdir()
    (directory / "node1-eth0.pcap").symlink_to(victim)
    write_pcaps([FRAME], directory)
    assert victim.read_text() == "keep me"
    assert not (directory / "node1-eth0.pcap").is_symlink()


def test_a_symlink_planted_as_a_subdirectory_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "captures").mkdir()
    (tmp_path / "captures" / "scenario").symlink_to(elsewhere)
    with pytest.raises(CaptureError, match="a symlink on the way"):
        write_pcaps([FRAME], tmp_path / "captures" / "scenario" / "probe")
    assert os.listdir(elsewhere) == []
