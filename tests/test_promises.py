"""The tool's promises, for every kind of input it reads (tests/kinds.py) and as a user spells it.

For each kind, its input lies in a folder whose name holds a space and `#`, and every command names
it relatively through `..` (as typed at a prompt), with `--out` and `--output_path` relative too:
- (a) the same command again answers `complete`, exit 0, and no file in the run folder or at
  --output_path changes (bytes and mtime);
- (b) SIGKILL mid-run, then the same command: the output equals the uninterrupted run's;
- (c) `slurm` planned twice with the same command is accepted, its scripts name absolute paths;
- (d) the run folder moved elsewhere: `status`, `verify`, `report` and `merge` work;
- (e) `verify` exits 0 on the finished run.

Both estimators: every kind with `--estimator wholebody` on the tiny ONNX models of
tests/tiny_onnx.py (a few milliseconds a frame: the promises are the job's, not the keypoints'),
and with Holistic (MediaPipe, 31-68 ms of CPU a frame) the kinds that stand for the others: a
PHOENIX folder, an archive, video files and a manifest of both sources (HOLISTIC_KINDS), so each
promise is also kept where the real estimator, its --output_path pkl and its slower frames are.
A whole-body run has no --output_path pkl, which is Holistic's layout.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import (
    SHARED_SAMPLE,
    VIDEOS,
    assert_no_traceback,
    assert_same_output,
    busy_workers,
    popen_cli,
    run_cli,
    sha256,
    wait_for,
)
from kinds import KINDS, Kind
from tiny_onnx import tiny_models

from phoenix_keypoints.extract.corpora import CORPORA
from phoenix_keypoints.extract.sources import SOURCES

pytestmark = pytest.mark.slow
# One worker takes the chunks in order, so the kill lands between the two videos' chunks.
OPTIONS = ["--workers-per-gpu", "1"]


def pace(estimator: str, kind: Kind) -> dict[str, str]:
    """Real frames, slowed, so that a kill lands mid-run (asserted below): 0.5 s a frame, or 0.25 s
    on whole-body where the kill follows a committed chunk (the tiny models take milliseconds a
    frame). A one-video kind's kill waits for the heartbeat (every 2 s) to show a worker inside the
    video: its ten frames keep 0.5 s on either estimator."""
    delay = "0.25" if estimator == "wholebody" and not kind.one_video else "0.5"
    return {"PHOENIX_KEYPOINTS_FAULTS": f"frame-delay={delay}"}


# the kinds Holistic runs too: a PHOENIX folder, an archive, video files, a manifest (both sources)
HOLISTIC_KINDS = ("phoenix-T", "archive-top.tar.gz", "videos", "manifest")
CELLS = [(k, "holistic") for k in KINDS if k.id in HOLISTIC_KINDS] + [(k, "wholebody") for k in KINDS]


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not (SHARED_SAMPLE / "annotations").is_dir() or not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory.mktemp("models"))


def test_every_registered_corpus_and_source_is_a_kind():
    """A corpus or frame source added to the registries must be built in tests/kinds.py, so that
    every promise below is tested on it without a new test: the whole-body cells run every kind,
    the Holistic cells a folder, an archive, video files and a manifest (every frame source)."""
    assert set(CORPORA) <= {k.corpus for k in KINDS}, set(CORPORA) - {k.corpus for k in KINDS}
    assert set(SOURCES) <= {s for k in KINDS for s in k.sources}
    assert [k for k, e in CELLS if e == "wholebody"] == list(KINDS)
    holistic = [k for k, e in CELLS if e == "holistic"]
    assert {k.id for k in holistic} == set(HOLISTIC_KINDS)
    assert set(SOURCES) <= {s for k in holistic for s in k.sources}


def files(*paths: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under the paths (or the file itself): bytes (sha256) and mtime."""
    out = {}
    for top in paths:
        for p in [top] if top.is_file() else sorted(q for q in top.rglob("*") if q.is_file()):
            st = p.stat()
            out[str(p)] = (st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def ok(proc, what: str) -> None:
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def typed(path: Path, cwd: Path) -> str:
    """path as a user types it from cwd: relative, through `..`."""
    rel = path.relative_to(cwd)
    return str(Path(rel.parts[0]) / "x" / ".." / Path(*rel.parts[1:]))


@pytest.mark.parametrize("kind,estimator", CELLS,
                         ids=[k.id if e == "holistic" else f"{e}-{k.id}" for k, e in CELLS])
def test_promises_hold(kind: Kind, estimator: str, tmp_path: Path, request: pytest.FixtureRequest):
    where = tmp_path / "in put #1"
    (where / "x").mkdir(parents=True)
    dataset = typed(kind.build(where), tmp_path)
    chosen = []
    if estimator == "wholebody":
        models = request.getfixturevalue("models")
        chosen = ["--estimator", "wholebody", "--detector", models["detector"], "--pose-model",
                  models["pose"]]

    def command(out: str) -> list[str]:
        pkl = ["--output_path", f"{out}.pkl"] if estimator == "holistic" else []
        return ["run", kind.flag, dataset, "--out", out, *pkl, *OPTIONS, *chosen]

    # the uninterrupted run; (e) verify
    ok(run_cli(command("out #1/a"), cwd=tmp_path), "run")
    a = tmp_path / "out #1" / "a"
    ok(run_cli(["verify", "--out", a]), "verify")

    # (a) the same command again: complete, nothing written
    before = files(a, tmp_path / "out #1" / "a.pkl")
    again = run_cli(command("out #1/a"), cwd=tmp_path)
    ok(again, "run again")
    assert "complete:" in again.stdout, again.stdout
    assert files(a, tmp_path / "out #1" / "a.pkl") == before

    # (b) SIGKILL after the first video's chunk is committed (one video: inside it), then the same
    # command
    b = tmp_path / "out #1" / "b"
    proc = popen_cli(command("out #1/b"), env=pace(estimator, kind), cwd=tmp_path)
    if kind.one_video:
        wait_for(lambda: busy_workers(b), 120, "a worker inside the video", proc)
    else:
        wait_for(lambda: any((b / "parts").glob("chunk-*.parquet")), 120, "a chunk committed", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not (b / "keypoints.parquet").exists(), "killed after the end: nothing was interrupted"
    chunks = len(set(pq.read_table(b / "plan.parquet")["chunk"].to_pylist()))
    assert len(list((b / "parts").glob("chunk-*.parquet"))) < chunks, "killed after the last chunk"
    ok(run_cli(command("out #1/b"), cwd=tmp_path), "resume")
    assert_same_output(b, a)

    # (c) slurm planned twice with the same command
    slurm = ["slurm", kind.flag, dataset, "--out", "out #1/c", "--num-shards", "2", *chosen]
    for _ in range(2):
        ok(run_cli(slurm, cwd=tmp_path), "slurm")
    script = (tmp_path / "out #1" / "c" / "slurm" / "shards.sbatch").read_text()
    assert f"--out '{tmp_path / 'out #1' / 'c'}'" in script, script

    # (d) the run folder moved: status, verify, report, merge
    moved = tmp_path / "moved #2" / "a"
    moved.parent.mkdir()
    shutil.move(a, moved)
    for cmd in (["status"], ["verify"], ["report"]):
        ok(run_cli([*cmd, "--out", moved]), f"{cmd[0]} on the moved folder")
    merged = sha256(moved / "keypoints.parquet")
    (moved / "keypoints.parquet").unlink()
    shutil.rmtree(moved / "tensors")
    ok(run_cli(["merge", "--out", moved]), "merge on the moved folder")
    assert sha256(moved / "keypoints.parquet") == merged
