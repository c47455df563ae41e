"""What a new user trips on in the first hour, round three (issue 53): progress in a log, the
rate of a video in report and show, the hints of refusals, names not found."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
from helpers import popen_cli

LINE = re.compile(r"frames: (\d+)/(\d+) committed \([\d.]+ %\), (\d+) in flight; "
                  r"[\d.]+ frames/s, (about .+ left|time left not known yet|all frames extracted)")


def committed_rows(run: Path) -> int:
    """Rows in the parts committed now (a part is committed once under its final name)."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in (run / "parts").glob("chunk-*.parquet"))


def test_progress_in_a_log_says_committed_and_in_flight(sample_root: Path, tmp_path: Path) -> None:
    """stderr a pipe: lines (no bar) saying what is committed and what is in flight, the
    committed count never above the rows of the parts on disk when the line is read."""
    run = tmp_path / "run"
    proc = popen_cli(["run", "--dataset", sample_root, "--out", run, "--chunk-frames", "20",
                      "--workers", "1"])
    seen: list[tuple[int, int, int]] = []
    lines = []
    assert proc.stderr is not None
    for raw in proc.stderr:
        lines.append(raw)
        m = LINE.search(raw)
        if m:
            on_disk = committed_rows(run) if (run / "parts").is_dir() else 0
            committed, total, flight = int(m[1]), int(m[2]), int(m[3])
            assert committed <= on_disk, (raw, on_disk)
            seen.append((committed, total, flight))
    assert proc.wait(timeout=300) == 0, "".join(lines)
    text = "".join(lines)
    assert "\r" not in text and "it/s" not in text, text  # no bar redrawn into the log
    assert len(seen) >= 3, text
    assert seen[-1] == (82, 82, 0), text
    assert any(flight > 0 for _, _, flight in seen), text  # in flight is told apart
    assert [c for c, _, _ in seen] == sorted(c for c, _, _ in seen)
