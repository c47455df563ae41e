"""Run folders that are not what they seem (issue 52 item 5): a part, run.json or progress.json that
is no regular file (a FIFO made by mkfifo), a run.json nested 200,000 deep or larger than any run
writes, a `format` that is a string. Each is named and refused (a part: redone), never waited on
and never a traceback; `status` answers whatever the folder holds.

A FIFO is what a hostile or confused folder holds most cheaply: opening one for reading waits for a
writer forever, so `run` and `status` hung on a597681 (and `status`, stopped, gave 4 tracebacks).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import assert_no_traceback, assert_same_output, run_cli

from phoenix_keypoints.jobs.rundir.folder import RunDir, RunError

FIFO = "not a regular file (a FIFO)"
HANG_S = 60  # a command that waited on a FIFO would wait forever: this long proves it does not


def _unmerged(clean_run: Path, tmp_path: Path) -> Path:
    """A copy of the reference run with its parts and no merge outputs: a run to resume."""
    out = tmp_path / "run"
    shutil.copytree(clean_run, out)
    (out / "keypoints.parquet").unlink()
    shutil.rmtree(out / "tensors")
    return out


def _record(clean_run: Path, tmp_path: Path) -> Path:
    """A folder holding the reference run's run.json and plan only: what status and verify read."""
    out = tmp_path / "run"
    out.mkdir()
    for name in ("run.json", "plan.parquet"):
        shutil.copy2(clean_run / name, out / name)
    return out


def _fifo_instead(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def test_a_part_that_is_a_fifo_is_named_by_status_and_redone_by_run(clean_run: Path,
                                                                     tmp_path: Path):
    """A committed part replaced by a FIFO: `run` hung, `status` hung (then 4 tracebacks); now
    status names the chunk untrusted, and the resume moves it aside with why and redoes it, the
    output the same as an uninterrupted run's."""
    out = _unmerged(clean_run, tmp_path)
    _fifo_instead(out / "parts" / "chunk-000002.parquet")
    status = run_cli(["status", "--out", out], timeout=HANG_S)
    assert_no_traceback(status)
    assert status.returncode == 0, status.stderr
    assert "untrusted parts (redone on the next run): [2]" in status.stdout, status.stdout
    again = run_cli(["run", "--out", out], timeout=4 * HANG_S)
    assert_no_traceback(again)
    assert again.returncode == 0, again.stderr
    assert f"part of chunk 2 not trusted ({FIFO}): moved to parts/rejected/, redoing it" \
        in again.stderr, again.stderr
    assert (out / "parts" / "rejected" / "chunk-000002.parquet.why").read_text() == FIFO + "\n"
    assert_same_output(out, clean_run)


@pytest.mark.parametrize("command", ["status", "verify", "run"])
def test_a_run_json_that_is_a_fifo_is_named_not_waited_on(command: str, clean_run: Path,
                                                           tmp_path: Path):
    out = _record(clean_run, tmp_path)
    _fifo_instead(out / "run.json")
    proc = run_cli([command, "--out", out], timeout=HANG_S)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"{out / 'run.json'}: {FIFO}: not read" in proc.stderr, proc.stderr


def test_a_heartbeat_that_is_a_fifo_is_named_by_status(clean_run: Path, tmp_path: Path):
    """progress.json is read by `status` only to say whether a coordinator runs: a FIFO in its
    place is named, and the rest of the status said."""
    out = _record(clean_run, tmp_path)
    _fifo_instead(out / "progress.json")
    proc = run_cli(["status", "--out", out], timeout=HANG_S)
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert f"heartbeat: {out / 'progress.json'}: {FIFO} (not read)" in proc.stdout, proc.stdout
    assert "chunks:   0/" in proc.stdout, proc.stdout


@pytest.mark.parametrize("command", ["status", "verify", "run"])
def test_a_run_json_200000_levels_deep_is_refused_before_json_parses_it(command: str,
                                                                        clean_run: Path,
                                                                        tmp_path: Path):
    """`{"format": 2, "x": [[[...]]]}` 200,000 deep: a RecursionError traceback, exit 1, in each
    of these commands on a597681; now refused by a scan before json parses it."""
    out = _record(clean_run, tmp_path)
    (out / "run.json").write_text('{"format": 2, "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    proc = run_cli([command, "--out", out], timeout=HANG_S)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert (f"{out / 'run.json'}: unreadable (nested 200,001 levels deep, more than 64). Start "
            "afresh") in proc.stderr, proc.stderr


def test_a_run_json_larger_than_any_run_writes_is_refused_unparsed(tmp_path: Path):
    """No run writes 8 MiB of run.json (its lists are capped): 9 MiB is refused before a parse."""
    (tmp_path / "run.json").write_bytes(b'{"format": 2, "x": "' + b"a" * 9 * 2**20 + b'"}')
    with pytest.raises(RunError, match=r"run.json: unreadable \(larger than 8,388,608 bytes\)"):
        RunDir(tmp_path).load()


@pytest.mark.parametrize("written, said", [('"2"', "format '2' (a string), this one reads 2"),
                                           ("2.0", "format 2.0 (a number), this one reads 2"),
                                           ("1", "format 1, this one reads 2")])
def test_a_format_is_named_as_written(written: str, said: str, tmp_path: Path):
    """run.json `"format": "2"` said "format 2, this one reads 2": the value as written, its type
    where it is no whole number."""
    (tmp_path / "run.json").write_text(json.dumps({"format": json.loads(written)}))
    with pytest.raises(RunError) as e:
        RunDir(tmp_path).load()
    assert said in str(e.value), str(e.value)


def test_a_part_that_is_a_folder_or_a_socket_is_named_for_what_it_is(tmp_path: Path):
    """The check every part passes before a resume trusts it (as `status` and `verify` do): what
    stands in a part's place is named, never opened blocking."""
    import socket

    from phoenix_keypoints.jobs.rundir.parts import check_part

    folder, sock = tmp_path / "chunk-000000.parquet", tmp_path / "chunk-000001.parquet"
    folder.mkdir()
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
        for path, what in ((folder, "a folder"), (sock, "a socket")):
            assert check_part(path, 0, "fp", {"v": 1}) == (None, f"not a regular file ({what})")
