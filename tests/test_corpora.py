"""Corpus readers on trees built in the test from the shared data: CSL-Daily (frames re-encoded as
JPEG, split_1.txt, a labels pickle), How2Sign (clips in its layout, realigned csv), a folder of
videos, and manifests of each kind; and each way such input can be broken. Readers are checked on
what they list; one real run over CSL-Daily shows text, gloss and signer reaching the outputs."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import (
    PHX_FRAMES,
    VIDEOS,
    assert_no_traceback,
    build_csl,
    build_how2sign,
    run_cli,
    video_rows,
)

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.corpora.base import DatasetError


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not VIDEOS.is_dir() or not PHX_FRAMES.is_dir():
        pytest.skip("shared data not found beside the repo")


# --- CSL-Daily -----------------------------------------------------------------------------------
def test_csl_daily_reader(tmp_path: Path):
    ds = discover(build_csl(tmp_path / "csl"))
    assert ds.layout == "csl-daily"
    by = {v.name: v for v in ds.videos}
    v = by["S000001_P0000_T00"]
    assert (v.split, v.speaker, v.gloss, v.translation) == ("train", "3", "你 好", "你好。")
    assert v.files == tuple(f"{i:06d}.jpg" for i in range(4)) and not v.problem
    assert json.loads(v.extra)["label_word"] == "你好 。"
    assert by["S000002_P0001_T00"].split == "dev"


class RunsCode:
    """What a tampered labels file holds: loading it with pickle.load would run a command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_csl_daily_labels_that_would_run_code_are_refused(tmp_path: Path):
    marker = tmp_path / "ran"
    root = build_csl(tmp_path / "csl", labels={"info": [], "x": RunsCode(marker)})
    with pytest.raises(DatasetError, match=r"csl2020ct_v2.pkl: refused: it asks for (posix|os)\.system"):
        discover(root)
    assert not marker.exists(), "the pickle's code must never run"
    proc = run_cli(["run", "--dataset", root, "--out", tmp_path / "run"])
    assert proc.returncode != 0 and "refused" in proc.stderr
    assert_no_traceback(proc)
    assert not marker.exists()


@pytest.mark.slow
def test_csl_daily_run_text_reaches_index_pkl_and_report(tmp_path: Path):
    root = build_csl(tmp_path / "csl", frames=3)
    out, pkl = tmp_path / "run", tmp_path / "out.pkl"
    proc = run_cli(["run", "--dataset", root, "--out", out])
    assert proc.returncode == 0, proc.stderr
    exported = run_cli(["export", "--out", out, "--format", "pkl", "--to", pkl])
    assert exported.returncode == 0, exported.stderr
    table = pq.read_table(out / "keypoints.parquet")
    assert table.num_rows == 6 and table["status"].to_pylist().count("ok") == 6
    assert video_rows(table, "S000001_P0000_T00")["image"].to_pylist()[0] == \
        "sentence/frames_512x512/S000001_P0000_T00/000000.jpg"
    index = pq.read_table(out / "tensors" / "train.index.parquet").to_pylist()
    assert [(r["video"], r["speaker"], r["gloss"], r["translation"]) for r in index] == \
        [("S000001_P0000_T00", "3", "你 好", "你好。")]
    assert json.loads(index[0]["extra"]) == {"label_word": "你好 。", "length": 3}
    with open(pkl, "rb") as f:
        entry = pickle.load(f)["S000002_P0001_T00"]
    got = (entry["split"], entry["gloss"], entry["text"], entry["speaker"])
    assert got == ("dev", "谢谢", "谢谢", "7")
    report = run_cli(["report", "--out", out])
    assert report.returncode == 0, report.stderr
    videos = pq.read_table(out / "report" / "videos.parquet").to_pylist()
    assert {r["video"]: r["speaker"] for r in videos} == {"S000001_P0000_T00": "3",
                                                          "S000002_P0001_T00": "7"}


# --- How2Sign ------------------------------------------------------------------------------------
def test_how2sign_reader(tmp_path: Path):
    ds = discover(build_how2sign(tmp_path / "h2s"))
    assert ds.layout == "how2sign"
    assert [(v.split, v.name, v.translation, v.num_frames, v.source) for v in ds.videos] == [
        ("dev", "-d5dN54tH2E_1-1-rgb_front", "Hi, I'm val.", 58, "video"),
        ("train", "-fZc293MpJk_0-1-rgb_front", "Hi, I'm train.", 58, "video")]
    assert json.loads(ds.videos[1].extra) == {"video_name": "-fZc293MpJk-1-rgb_front",
                                              "start_realigned": "1.5", "end_realigned": "3.2"}
    assert ds.unlisted == ["train/unlisted_0-1-rgb_front.mp4"]
    assert [v.name for v in discover(tmp_path / "h2s", splits=("dev",)).videos] == \
        ["-d5dN54tH2E_1-1-rgb_front"]


# --- a folder of videos --------------------------------------------------------------------------
def test_video_folder_reader_splits_and_names(tmp_path: Path):
    root = tmp_path / "vids"
    for rel in ("train/a.mp4", "val/b.webm", "c.mp4", "test/deep/d.mp4", ".hidden/e.mp4"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(VIDEOS / ("signer_demo.webm" if rel.endswith("webm") else "signer_demo.mp4"),
                        root / rel)
    (root / "train" / "notes.txt").write_text("not a video")
    ds = discover(root)
    assert ds.layout == "videos"
    assert [(v.split, v.name, v.folder, v.num_frames) for v in ds.videos] == [
        ("all", "c", "c.mp4", 58), ("dev", "b", "val/b.webm", 58),
        ("test", "d", "test/deep/d.mp4", 58), ("train", "a", "train/a.mp4", 58)]
    shutil.copyfile(VIDEOS / "signer_demo.webm", root / "train" / "a.webm")
    with pytest.raises(DatasetError, match=r"train/a.webm: video 'a' is listed twice .*train/a.mp4"
                                           r".*Rename one of the files"):
        discover(root)


# --- manifests -----------------------------------------------------------------------------------
def build_manifest_tree(root: Path) -> Path:
    (root / "media").mkdir(parents=True)
    shutil.copyfile(VIDEOS / "signer_demo.mp4", root / "media" / "clip.mp4")
    shutil.copytree(PHX_FRAMES / "train" / "signer_demo-1", root / "media" / "frames")
    return root


ROWS = [
    {"name": "vid", "split": "train", "path": "media/clip.mp4", "text": "a video", "signer": "s1",
     "gloss": "HELLO", "source_url": "https://example.org/1"},
    {"name": "folder", "split": "dev", "path": "media/frames", "text": "a frame folder"},
    {"name": "glob", "split": "test", "path": "media/frames/images00[0-2]*.png", "start": "2",
     "end": "4"},
    {"name": "outside", "split": "test", "path": "../elsewhere/x.mp4"},
    {"name": "nothing", "split": "test", "path": "media/missing.mp4"},
    {"name": "past_end", "split": "test", "path": "media/clip.mp4", "start": "50", "end": "70"},
]


def write_manifest(path: Path, rows: list[dict]) -> Path:
    cols = ["name", "split", "path", "start", "end", "text", "signer", "gloss", "source_url"]
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        sep = "\t" if path.suffix == ".tsv" else ","
        path.write_text(sep.join(cols) + "\n" + "".join(
            sep.join(r.get(c, "") for c in cols) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_manifest_reader(tmp_path: Path, suffix: str):
    root = build_manifest_tree(tmp_path / "m")
    ds = discover(write_manifest(root / f"list{suffix}", ROWS))
    assert ds.layout == "manifest" and ds.root == root and ds.manifest == f"list{suffix}"
    by = {v.name: v for v in ds.videos}
    frames = sorted(p.name for p in (root / "media" / "frames").glob("images*.png"))
    assert (by["vid"].source, by["vid"].num_frames, by["vid"].translation, by["vid"].speaker,
            by["vid"].gloss) == ("video", 58, "a video", "s1", "HELLO")
    assert json.loads(by["vid"].extra) == {"source_url": "https://example.org/1"}
    assert by["folder"].files == tuple(frames) and by["folder"].split == "dev"
    assert by["glob"].files == tuple(frames[1:4])
    assert "leaves the dataset's folder" in by["outside"].problem
    assert by["nothing"].problem == "no video file"
    assert by["past_end"].problem == "range 50-70 is past the end: the video has 58 frames"


def test_manifest_duplicates_and_bad_rows_refused_with_their_line(tmp_path: Path):
    root = build_manifest_tree(tmp_path / "m")
    dup = write_manifest(root / "dup.csv", [ROWS[0], {**ROWS[1], "name": "vid"}])
    with pytest.raises(DatasetError, match=r"dup.csv:3: video 'vid' is listed twice \(first at "
                                           r".*dup.csv:2\)"):
        discover(dup)
    bad = write_manifest(root / "bad.csv", [{**ROWS[0], "start": "ten"}])
    with pytest.raises(DatasetError, match=r"bad.csv:2: start 'ten' is not an integer"):
        discover(bad)
    (root / "nocol.csv").write_text("name,path\nx,media/clip.mp4\n")
    with pytest.raises(DatasetError, match=r"nocol.csv:1: header lacks column\(s\) split"):
        discover(root / "nocol.csv")
