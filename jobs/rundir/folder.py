"""The run folder: what a run is (run.json, plan.parquet) and where its pieces go.

Everything needed to resume lives here and nowhere else, so any process on any node that sees the
folder (a resumed run, `status` from another shell, a SLURM shard, the merge job) gets the same
view. Files are replaced atomically (write a temp, fsync, rename) so a crash leaves either the old
or the new version, never half of one.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.filemeta import read_parquet
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.rundir.runinfo import (
    RUN_FORMAT,
    RunInfo,
    RunInfoError,
    format_named,
    reads_format,
)

# run.json holds a few KB (its lists are capped); what no run writes is refused before json parses it
RUN_JSON_MAX_BYTES = 8 * 2**20
JSON_MAX_DEPTH = 64  # run.json nests 4 deep; 200,000 levels were a RecursionError traceback
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
# a JSON string, or what is left of one that never closes: the scan below never restarts inside one
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)


class NotAFile(OSError):
    """A run folder's file that is something else (a FIFO, a device, a folder): never opened
    blocking, never read. Its message names what it is."""


def not_a_file(path: Path) -> str:
    """Why path is no regular file ("" when it is one; a FIFO or a device is stat'ed, never opened,
    so this cannot hang). FileNotFoundError where nothing is there."""
    return _kind(os.stat(path).st_mode)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return ""
    what = next((name for test, name in _KINDS if test(mode)), "not a file")
    return f"not a regular file ({what})"


def open_regular(path: Path) -> BinaryIO:
    """A run folder's file opened for reading only if it is a regular file: stat'ed first, then
    opened without blocking and checked again (it may have been swapped meanwhile), so a FIFO or a
    device in its place is named (NotAFile), never waited on."""
    if why := not_a_file(path):
        raise NotAFile(f"{path}: {why}")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    if why := _kind(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotAFile(f"{path}: {why}")
    return os.fdopen(fd, "rb")


def read_small(path: Path, limit: int) -> bytes:
    """A run folder's file read back (open_regular), at most `limit` bytes of it (ValueError)."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit:,} bytes")
    return data


def json_depth(data: bytes) -> int:
    """How deep JSON text nests its arrays and objects, strings left out: a cheap scan before
    json parses it (Python's parser recurses once a level)."""
    import numpy as np

    text = np.frombuffer(_JSON_STRING.sub(b"", data), dtype=np.uint8)
    opens, closes = (text == 91) | (text == 123), (text == 93) | (text == 125)  # [{ and ]}
    steps = opens[opens | closes].astype(np.int32) * 2 - 1
    return int(steps.cumsum().max(initial=0))


def load_json(path: Path, limit: int) -> Any:
    """A run folder's JSON file (run.json, a heartbeat), bounded in size and nesting: NotAFile,
    OSError or ValueError (its message says why) for anything else."""
    data = read_small(path, limit)
    if (depth := json_depth(data)) > JSON_MAX_DEPTH:
        raise ValueError(f"nested {depth:,} levels deep, more than {JSON_MAX_DEPTH}")
    return json.loads(data)


class RunError(Exception):
    """The run folder cannot be used as asked (refused input, exit 2); the message says what to do."""


class JobFailed(Exception):
    """The job could not finish for a reason outside its input (disk full): exit 1, resumable."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write data to path so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide run files from a cluster group
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename durable: on power loss a renamed file is only there once its folder is synced."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def versions() -> dict[str, str]:
    """Versions recorded with every run, whatever its family: the family's own library is added by
    extract.keypoints.versions.value_versions, so a run records what IT depends on. A run planned before
    keeps the record it was planned with."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for dist in ("phoenix-keypoints", "numpy", "opencv-contrib-python", "pyarrow"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (what a mkdir -p would make)."""
    path = Path(path).absolute()
    top = None
    while not path.exists() and path != path.parent:
        top, path = path, path.parent
    return top


def remove_worker_logs(rd: RunDir) -> None:
    """The worker logs of a run refused before it planned anything (workers start while the
    coordinator plans), and logs/ when nothing else is in it: a folder the user made keeps only
    what was theirs."""
    logs = rd.path / "logs"
    for p in logs.glob("*worker-*.log") if logs.is_dir() else []:
        p.unlink(missing_ok=True)
    with suppress(OSError):  # something else is in it now: leave it
        logs.rmdir()


def remove_new_folder(rd: RunDir, made: Path) -> None:
    """Remove a run folder this process made (`made`: the outermost folder it created) but planned
    nothing in, as a refused or stopped `run` must: its lock files and worker logs, then the
    folders, unless something else is in them now."""
    for p in rd.path.glob(".*.lock"):
        p.unlink(missing_ok=True)
    remove_worker_logs(rd)
    folder = rd.path.absolute()
    while True:
        try:
            folder.rmdir()
        except OSError:
            return
        if folder == made:
            return
        folder = folder.parent


@dataclass
class RunDir:
    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if ".." in self.path.parts:  # LINK/../NAME: the folder the shell and the kernel mean (the
            self.path = Path(os.path.realpath(self.path))  # link's target's parent), not a lexical one

    # --- files -------------------------------------------------------------------------------
    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def plan_path(self) -> Path:
        return self.path / "plan.parquet"

    @property
    def parts_dir(self) -> Path:
        return self.path / "parts"

    @property
    def rejected_dir(self) -> Path:
        return self.path / "parts" / "rejected"

    @property
    def claims_dir(self) -> Path:
        return self.path / "claims"

    @property
    def progress_path(self) -> Path:
        return self.path / "progress.json"

    def progress_file(self, shard: int | None = None) -> Path:
        """The heartbeat of one coordinator: progress.json, or progress-shard-I.json per shard."""
        return self.path / f"progress-shard-{shard}.json" if shard is not None else self.progress_path

    def shard_progress_files(self) -> list[Path]:
        return sorted(self.path.glob("progress-shard-*.json"))

    @property
    def keypoints_path(self) -> Path:
        return self.path / "keypoints.parquet"

    @property
    def tensors_dir(self) -> Path:
        return self.path / "tensors"

    def part_path(self, chunk: int) -> Path:
        return self.parts_dir / f"chunk-{chunk:06d}.parquet"

    @property
    def archive_dir(self) -> Path:
        """The index of a dataset read from an archive file (extract/sources/archive.py)."""
        return self.path / "archive"

    def use_archive_index(self, write: bool = True, build: bool = True, lazy: bool = False) -> None:
        """This process finds (and keeps) archive indexes in this run folder (lazy: a worker)."""
        from phoenix_keypoints.extract.sources.archive_index import set_index_dir

        set_index_dir(self.archive_dir, write, build, lazy)

    def exists(self) -> bool:
        """Whether run.json is there, whatever it is: a FIFO or a folder in its place makes a run
        folder gone wrong, named by load(), not an empty folder to plan a run in."""
        return os.path.lexists(self.run_json)

    # --- run.json ----------------------------------------------------------------------------
    def load(self) -> RunInfo:
        try:
            raw = load_json(self.run_json, RUN_JSON_MAX_BYTES)
        except FileNotFoundError:
            raise RunError(
                f"{self.path} holds no run (no run.json). Start one with "
                f"`phoenix-keypoints run {messages.ANY_INPUT} --out {messages.quote(self.path)}`."
            ) from None
        except NotAFile as e:
            raise RunError(f"{e}: not read. Put the run's run.json back, or start afresh: "
                           f"{messages.fresh(self.path)}.") from None
        except (OSError, ValueError) as e:
            raise RunError(f"{self.run_json}: unreadable ({e}). Start afresh: "
                           f"{messages.fresh(self.path)}.") from None
        try:
            return RunInfo.from_json(raw)
        except RunInfoError as e:
            if isinstance(raw, dict) and not reads_format(raw.get("format")):
                raise RunError(
                    f"{self.run_json}: written by another version of phoenix-keypoints (format "
                    f"{format_named(raw.get('format'))}, this one reads {RUN_FORMAT}). Use another "
                    "--out, or "
                    f"start afresh: {messages.fresh(self.path)}."
                ) from None
            raise RunError(f"{self.run_json}: not a valid run record ({e}). Start afresh: "
                           f"{messages.fresh(self.path)}.") from None

    def save(self, info: RunInfo) -> None:
        atomic_write_bytes(self.run_json, info.dumps().encode())

    def update(self, change: Callable[[RunInfo], None]) -> RunInfo:
        """Load run.json, apply change, save it (callers hold the run's lock)."""
        info = self.load()
        change(info)
        self.save(info)
        return info

    # --- plan --------------------------------------------------------------------------------
    def save_plan(self, plan: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        pq.write_table(plan, sink, compression="zstd")
        atomic_write_bytes(self.plan_path, sink.getvalue().to_pybytes())

    def load_plan(self) -> pa.Table:
        try:
            if why := not_a_file(self.plan_path):  # a FIFO would hang the read
                raise NotAFile(why)
            return read_parquet(self.plan_path)
        except (OSError, pa.ArrowException) as e:
            raise RunError(f"{self.plan_path}: unreadable ({e}). Start afresh: "
                           f"{messages.fresh(self.path)}.") from None
