"""What lab vm prints while it prepares a kernel: one line per stage in a log, a line rewritten in place on a
terminal, and a download's bytes as the file grows (a real process writing a real file here)."""

from __future__ import annotations

import io

from lab.vm.progress import Progress, download_line, watch_download


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_download_line_says_bytes_share_and_rate():
    assert download_line("downloading k", 123_000_000, 490_000_000, 10) == (
        "downloading k: 123 MB of 490 MB (25%), 12.3 MB/s"
    )
    assert download_line("downloading k", 500_000, 0, 0) == "downloading k: 0.5 MB"


def test_a_log_gets_one_line_per_stage_and_no_carriage_returns():
    log = io.StringIO()
    progress = Progress(log)
    progress.stage("reading the package lists")
    progress.update("downloading: 1 MB")  # in place on a terminal only
    progress.stage("unpacking")
    assert log.getvalue() == "lab vm: reading the package lists\nlab vm: unpacking\n"


def test_a_download_is_shown_as_it_grows(tmp_path):
    screen = Terminal()
    script = "head -c 2000000 /dev/zero > part; sleep 0.6; head -c 2000000 /dev/zero >> part; sleep 0.3"
    done = watch_download(["sh", "-c", script], tmp_path, "downloading x", 4_000_000, Progress(screen))
    assert done.returncode == 0
    shown = screen.getvalue()
    assert "\r\x1b[Klab vm: downloading x: 2.0 MB of 4.0 MB (50%)" in shown
    assert shown.rstrip().splitlines()[-1].startswith("lab vm: downloading x: 4.0 MB of 4.0 MB (100%)")
