"""A run folder made before time_s, pose_world and the refine/static options existed is not stranded:
status, verify, merge, report, diff, tensors and every export still read it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import assert_no_traceback, run_cli

from phoenix_keypoints.extract.families.holistic.declaration import (
    EARLIEST_SCHEMA,
    OPTIONAL_COLUMNS,
    declaration,
)
from phoenix_keypoints.jobs.rundir.parts import META_KEY

OLD_HOLISTIC_KEYS = ("model_complexity", "smooth_landmarks", "min_detection_confidence",
                     "min_tracking_confidence")


def _without_world(src: Path, dest: Path) -> None:
    """src rewritten as the previous version wrote it: no time_s or pose_world column, its footer's own
    metadata kept (minus the Holistic options it did not record)."""
    pf = pq.ParquetFile(src)
    meta = dict(pf.schema_arrow.metadata or {})
    if META_KEY in meta:
        footer = json.loads(meta[META_KEY])
        footer.pop("holistic", None)
        meta[META_KEY] = json.dumps(footer).encode()
    table = pf.read().drop_columns(list(OPTIONAL_COLUMNS)).replace_schema_metadata(meta or None)
    assert table.schema.remove_metadata().equals(EARLIEST_SCHEMA)
    options = declaration().write_options()
    options["use_byte_stream_split"] = [c for c in options["use_byte_stream_split"]
                                        if c.split(".")[0] not in OPTIONAL_COLUMNS]
    pq.write_table(table, dest, row_group_size=2048, **options)


@pytest.fixture(scope="module")
def old_run(clean_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run as the version before left it: run.json without the new Holistic
    options, parts and keypoints.parquet without time_s and pose_world."""
    out = tmp_path_factory.mktemp("format1") / "run"
    (out / "parts").mkdir(parents=True)
    raw = json.loads((clean_run / "run.json").read_text())
    raw["options"]["holistic"] = {k: raw["options"]["holistic"][k] for k in OLD_HOLISTIC_KEYS}
    (out / "run.json").write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    shutil.copy2(clean_run / "plan.parquet", out / "plan.parquet")
    for part in sorted((clean_run / "parts").glob("chunk-*.parquet")):
        _without_world(part, out / "parts" / part.name)
    _without_world(clean_run / "keypoints.parquet", out / "keypoints.parquet")
    shutil.copytree(clean_run / "tensors", out / "tensors")
    return out


def _ok(args: list) -> str:
    proc = run_cli(args)
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_old_folder_is_read_by_every_command(old_run: Path, clean_run: Path, tmp_path: Path):
    assert "Traceback" not in _ok(["status", "--out", old_run])
    _ok(["verify", "--out", old_run])
    assert "agree" in _ok(["diff", old_run, clean_run])  # pose_world compared only where both have it
    _ok(["report", "--out", old_run])
    assert (old_run / "report" / "index.html").is_file()
    _ok(["tensors", "--out", old_run, "--preset", "hands-body-59"])
    _ok(["export", "--out", old_run, "--format", "pkl", "--to", tmp_path / "k.pkl"])
    _ok(["export", "--out", old_run, "--format", "islr", "--to", tmp_path / "islr"])
    pytest.importorskip("pose_format", reason="pose-format not installed (pip install -e '.[pose]')")
    from test_export import check_pose_export

    _ok(["export", "--out", old_run, "--format", "pose", "--to", tmp_path / "poses"])
    check_pose_export(old_run, tmp_path / "poses")  # no POSE_WORLD_LANDMARKS: none recorded


def test_old_parts_merge_with_pose_world_null(old_run: Path, clean_run: Path):
    """Its parts are trusted (not redone, not moved aside) and merged; pose_world, which they never
    recorded, is null; every other column equals the reference."""
    (old_run / "keypoints.parquet").unlink()
    _ok(["merge", "--out", old_run])
    assert not (old_run / "parts" / "rejected").exists()
    got, ref = pq.read_table(old_run / "keypoints.parquet"), pq.read_table(clean_run /
                                                                            "keypoints.parquet")
    assert got.column_names == ref.column_names
    assert got["pose_world"].null_count == got.num_rows
    assert got["time_s"].null_count == got.num_rows == ref["time_s"].null_count  # frame files
    assert got.drop_columns(["pose_world"]).equals(ref.drop_columns(["pose_world"]))
