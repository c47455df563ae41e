"""The original PHOENIX-2014 layout is detected by itself and gives the same outputs as the T
layout for the same frames (`<split>.corpus.csv` id|folder|signer|annotation, frames in
`<split>/<id>/1/<rec>.avi_pid0_fn000000-0.png`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import RUN_ARGS, assert_no_traceback, build_2014_layout, read_keypoints, run_cli

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.corpora.phoenix import LAYOUT_2014


@pytest.fixture(scope="module")
def root_2014(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_2014_layout(sample_root, tmp_path_factory.mktemp("p2014") / "phoenix-2014")


def test_detected_and_frames_in_number_order(root_2014: Path, sample_root: Path):
    ds, ref = discover(root_2014), discover(sample_root)
    assert ds.layout == LAYOUT_2014 and not ds.unlisted
    assert [(v.split, v.name, v.num_frames, v.speaker, v.gloss) for v in ds.videos] == \
        [(v.split, v.name, v.num_frames, v.speaker, v.gloss) for v in ref.videos]
    v = ds.videos[0]
    assert v.folder == f"features/fullFrame-210x260px/{v.split}/{v.name}/1"
    assert v.files[:2] == (f"{v.name}-rec.avi_pid0_fn000000-0.png",
                           f"{v.name}-rec.avi_pid0_fn000001-0.png")


def test_same_outputs_as_the_t_layout(root_2014: Path, clean_run: Path, tmp_path: Path):
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", root_2014, "--out", out, *RUN_ARGS])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "run.json").read_text())["dataset"]["layout"] == LAYOUT_2014
    got, ref = read_keypoints(out), read_keypoints(clean_run)
    # Same bytes (sizes and sha256 equal), but new files: their paths and mtimes differ.
    drop = ["image", "file_mtime_ns"]
    assert got.drop_columns(drop).equals(ref.drop_columns(drop))
    assert got["image"][0].as_py().endswith("/1/cameraman-1-rec.avi_pid0_fn000000-0.png")
    for f in sorted((clean_run / "tensors").iterdir()):
        if f.suffix == ".npy":
            np.testing.assert_array_equal(np.load(out / "tensors" / f.name), np.load(f))
        elif f.suffix == ".json":  # the same but for the source file's size (longer paths)
            got_json, ref_json = (json.loads(p.read_text()) for p in (out / "tensors" / f.name, f))
            for j in (got_json, ref_json):
                j.get("source", {}).pop("bytes", None)
            assert got_json == ref_json
        else:  # PHOENIX-2014 has glosses but no German translation
            index = pq.read_table(out / "tensors" / f.name)
            assert set(index["translation"].to_pylist()) == {""}
            drop = ["translation"]
            assert index.drop_columns(drop).equals(pq.read_table(f).drop_columns(drop))


def test_2014_folder_outside_root_refused(root_2014: Path, tmp_path: Path):
    csv = root_2014 / "annotations" / "manual" / "dev.corpus.csv"
    text = csv.read_text()
    bad = tmp_path / "phoenix-2014"
    (bad / "annotations" / "manual").mkdir(parents=True)
    for f in csv.parent.iterdir():
        (bad / "annotations" / "manual" / f.name).write_text(f.read_text())
    (bad / "annotations" / "manual" / "dev.corpus.csv").write_text(
        text.replace("cameraman-1/1/*.png", "../../../../etc/1/*.png"))
    proc = run_cli(["run", "--dataset", bad, "--out", tmp_path / "run"])
    assert_no_traceback(proc)
    assert proc.returncode == 2
    assert f"{bad / 'annotations/manual/dev.corpus.csv'}:2: video path" in proc.stderr
    assert "points outside the dataset root" in proc.stderr
