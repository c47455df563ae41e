"""A video's frames are the release's frame names: hidden files and other names are skipped and
reported, and every frame name keeps its row (and its number) even when it is no readable file.
Names are compared in Unicode NFC. Everything is written to disk for real; runs use the real CLI."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import unicodedata
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import (
    RUN_ARGS,
    assert_no_traceback,
    build_2014_layout,
    copy_dataset,
    read_keypoints,
    run_cli,
    same_keypoints,
    video_rows,
)

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.corpora.base import DatasetError
from phoenix_keypoints.extract.corpora.phoenix import LAYOUT_2014, LAYOUT_T, list_frames
from phoenix_keypoints.extract.families.holistic.points import PARTS
from phoenix_keypoints.jobs.run.plan import make_plan

FRAMES = "features/fullFrame-210x260px"
MANUAL = "annotations/manual"
APPLEDOUBLE = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + bytes(64)
NOT_FRAMES = {  # name -> reason it is skipped
    "._images0001.png": "hidden file",
    ".DS_Store": "hidden file",
    "notes.txt": "not a frame name",
    "images0001.png.bak": "not a frame name",
    "cover.png": "not a frame name",  # a real PNG, but not named like a frame
    "extra": "folder",
}


def _writable(folder: Path) -> None:
    """The shared sample ships read-only; a copy must be writable to be damaged."""
    folder.chmod(folder.stat().st_mode | stat.S_IWUSR)


# PHOENIX-2014's own csv says `<id>/1/*.png`: there any visible .png is a frame, cover.png too.
NOT_FRAMES_2014 = {n: r for n, r in NOT_FRAMES.items() if n != "cover.png"}


def _add_not_frames(folder: Path, cover: bool = True) -> None:
    """Every kind of entry that is no frame; the valid PNGs among them would sort before images*."""
    _writable(folder)
    first = folder / sorted(p.name for p in folder.iterdir())[0]
    (folder / "._images0001.png").write_bytes(APPLEDOUBLE)
    (folder / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (folder / "notes.txt").write_text("frames checked\n")
    shutil.copyfile(first, folder / "images0001.png.bak")
    if cover:
        shutil.copyfile(first, folder / "cover.png")
    (folder / "extra").mkdir()


def _make_unreadable(path: Path) -> None:
    """A frame name whose read fails: mode 000, or (root ignores modes) a link to /proc/self/mem,
    which is never opened (UNREADABLE: its status then is `not_a_file`)."""
    if os.geteuid() == 0:
        path.unlink(missing_ok=True)
        path.symlink_to("/proc/self/mem")
    else:
        path.chmod(0)


UNREADABLE = "not_a_file" if os.geteuid() == 0 else "unreadable"


def _bad_frames(folder: Path, first: int) -> None:
    """Frame names `first`, +1, +2 that are no readable file: a dangling link, a directory, an
    unreadable file."""
    _writable(folder)
    names = [folder / f"images{n:04d}.png" for n in (first, first + 1, first + 2)]
    for p in names[:2]:
        p.unlink(missing_ok=True)
    names[0].symlink_to(folder / "gone.png")
    names[1].mkdir()
    if not names[2].exists():
        shutil.copyfile(folder / "images0001.png", names[2])
    _make_unreadable(names[2])


# --- listing: which names are frames ------------------------------------------------------------
def test_t_layout_frames_are_release_names(tmp_path: Path):
    for n in range(1, 9):
        (tmp_path / f"images{n:04d}.png").write_bytes(b"")
    _add_not_frames(tmp_path)
    _bad_frames(tmp_path, 5)
    frames, ignored, _ = list_frames(tmp_path, LAYOUT_T)
    assert frames == [f"images{n:04d}.png" for n in range(1, 9)]
    assert dict(ignored) == NOT_FRAMES and [n for n, _ in ignored] == sorted(NOT_FRAMES)


def test_2014_layout_frames_are_png_names_not_hidden(tmp_path: Path):
    names = [f"01April_2010_Thursday_heute_default-1.avi_pid0_fn{i:06d}-0.png" for i in range(12)]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    (tmp_path / f"._{names[0]}").write_bytes(APPLEDOUBLE)
    (tmp_path / "Thumbs.db").write_bytes(b"x")
    (tmp_path / f"{names[1]}.bak").write_bytes(b"x")
    frames, ignored, _ = list_frames(tmp_path, LAYOUT_2014)
    assert frames == names, "fn000010 after fn000009, none missing"
    (tmp_path / "thumb.png").write_bytes(b"x")
    assert list_frames(tmp_path, LAYOUT_2014)[0] == [*names, "thumb.png"], "the csv's *.png"
    assert dict(ignored) == {f"._{names[0]}": "hidden file", "Thumbs.db": "not a frame name",
                             f"{names[1]}.bak": "not a frame name"}


def test_2014_release_folder_reports_what_it_skipped(sample_root: Path, tmp_path: Path):
    root = build_2014_layout(sample_root, tmp_path / "phoenix-2014")
    ref = discover(root)
    video = ref.videos[0]
    _add_not_frames(root / video.folder, cover=False)
    ds = discover(root)
    got = next(v for v in ds.videos if v.name == video.name)
    assert got.files == video.files and dict(got.ignored) == NOT_FRAMES_2014
    assert ds.fingerprint() == ref.fingerprint(), "skipped files do not decide the output"
    plan = make_plan(ds, 20).to_pylist()
    row = next(r for r in plan if r["video"] == video.name)
    assert {d["name"]: d["reason"] for d in row["ignored"]} == NOT_FRAMES_2014
    assert all(r["ignored"] == [] for r in plan if r["video"] != video.name)


# --- Unicode normalisation ----------------------------------------------------------------------
def _rename_video(root: Path, split: str, old: str, csv_name: str, folder_name: str) -> None:
    """List video `old` as csv_name in the corpus and move its frames to folder_name on disk."""
    (root / FRAMES / split / old).rename(root / FRAMES / split / folder_name)
    csv = root / MANUAL / f"PHOENIX-2014-T.{split}.corpus.csv"
    csv.write_text(csv.read_text(encoding="utf-8").replace(f"{old}|{old}/",
                                                           f"{csv_name}|{csv_name}/"),
                   encoding="utf-8")


NFC_NAME = unicodedata.normalize("NFC", "caf\u00e9-1")
NFD_NAME = unicodedata.normalize("NFD", NFC_NAME)


@pytest.mark.parametrize(("csv_name", "folder_name"), [(NFC_NAME, NFD_NAME), (NFD_NAME, NFC_NAME)],
                         ids=["nfd-folder", "nfd-csv"])
def test_names_equal_in_nfc_are_matched(sample_root: Path, tmp_path: Path, csv_name: str,
                                        folder_name: str):
    assert csv_name != folder_name
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T")
    _rename_video(root, "test", "coffee-1", csv_name, folder_name)
    ds = discover(root)
    v = next(v for v in ds.videos if v.name == csv_name)
    assert v.problem == "" and v.num_frames == 12
    assert v.folder == f"{FRAMES}/test/{folder_name}", "paths keep the spelling on disk"
    assert ds.unlisted == []
    other = NFD_NAME if csv_name == NFC_NAME else NFC_NAME
    assert [v.name for v in discover(root, videos=[other]).videos] == [csv_name]


def test_two_folders_equal_in_nfc_are_not_guessed(sample_root: Path, tmp_path: Path):
    """csv: U+1EC7; disk: e + dot below + circumflex (NFD) and e + circumflex + dot below."""
    name = "vi\u1ec7t-1"
    nfd, reordered = (f"vie{marks}t-1" for marks in ("\u0323\u0302", "\u0302\u0323"))
    assert len({name, nfd, reordered}) == 3
    assert {unicodedata.normalize("NFC", n) for n in (nfd, reordered)} == {name}
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T")
    _rename_video(root, "test", "coffee-1", name, nfd)
    shutil.copytree(root / FRAMES / "test" / nfd, root / FRAMES / "test" / reordered)
    v = next(v for v in discover(root).videos if v.name == name)
    assert v.num_frames == 0
    assert v.problem == f"folders {sorted([nfd, reordered])[0]!r} and " \
                        f"{sorted([nfd, reordered])[1]!r} differ only in Unicode normalisation"


def test_csv_names_equal_in_nfc_are_listed_twice(sample_root: Path, tmp_path: Path):
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T")
    _rename_video(root, "test", "coffee-1", NFC_NAME, NFC_NAME)
    csv = root / MANUAL / "PHOENIX-2014-T.dev.corpus.csv"
    line = f"{NFD_NAME}|{NFD_NAME}/1/*.png|-1|-1|Signer05|X|x\n"
    csv.write_text(csv.read_text(encoding="utf-8") + line, encoding="utf-8")
    with pytest.raises(DatasetError, match="equal in Unicode NFC"):
        discover(root)


# --- the real CLI on a damaged copy: rows, statuses, numbers, other frames untouched -------------
@pytest.fixture(scope="module")
def named_run(sample_root: Path, tmp_path_factory: pytest.TempPathFactory):
    """hopper-1 gets every kind of non-frame and frames 5-7 that cannot be read; coffee-1's folder
    is renamed to NFD with the csv in NFC. Also a reference run of hopper-1 whose frames 5-7 are
    merely empty, so MediaPipe sees the same frames in the same order."""
    tmp = tmp_path_factory.mktemp("naming")
    root = copy_dataset(sample_root, tmp / "bad" / "PHOENIX-2014-T")
    _add_not_frames(root / FRAMES / "train" / "hopper-1")
    _bad_frames(root / FRAMES / "train" / "hopper-1", 5)
    _rename_video(root, "test", "coffee-1", NFC_NAME, NFD_NAME)
    out = tmp / "run"
    proc = run_cli(["run", "--dataset", root, "--out", out, *RUN_ARGS])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    ref_root = copy_dataset(sample_root, tmp / "ref" / "PHOENIX-2014-T")
    for n in (5, 6, 7):
        (ref_root / FRAMES / "train" / "hopper-1" / f"images{n:04d}.png").write_bytes(b"")
    ref = tmp / "ref-run"
    proc = run_cli(["run", "--dataset", ref_root, "--out", ref, "--videos", "hopper-1",
                    "--workers-per-gpu", "1"])
    assert proc.returncode == 0, proc.stderr
    return root, out, ref


def test_every_frame_name_has_its_row_and_number(named_run):
    root, out, _ = named_run
    rows = video_rows(read_keypoints(out), "hopper-1").to_pylist()
    assert len(rows) == 20
    for i, r in enumerate(rows):
        assert r["frame"] == i and r["image"].endswith(f"/hopper-1/images{i + 1:04d}.png"), r
    expected = {4: ("missing", "no such file (or a link to nothing)"),
                5: ("not_a_file", "a directory"), 6: (UNREADABLE, None)}
    for i, (status, note) in expected.items():
        r = rows[i]
        assert r["status"] == status, r
        assert note is None or r["note"] == note
        assert all(r[p] is None for p in PARTS) and r["width"] is None
        assert (r["file_size"], r["file_mtime_ns"], r["file_sha256"]) == (None, None, None)
    assert all(r["status"] == "ok" for i, r in enumerate(rows) if i not in expected)


def test_no_other_frame_changes(named_run, clean_run: Path):
    _, out, ref = named_run
    got, clean = read_keypoints(out), read_keypoints(clean_run)
    for video in ("cameraman-1", "hopper-2", "astronaut-1"):
        assert same_keypoints(got, clean, video), video
    cols = ["frame", "status", *PARTS]
    hopper = video_rows(got, "hopper-1").select(cols)
    assert hopper.slice(0, 4).equals(video_rows(clean, "hopper-1").select(cols).slice(0, 4))
    # After the bad names, the frames are exactly what they are when those frames are empty files.
    assert hopper.drop_columns(["status"]).equals(
        video_rows(read_keypoints(ref), "hopper-1").select(cols).drop_columns(["status"]))
    renamed = got.filter(pc.equal(got["video"], NFC_NAME)).select(cols)
    assert renamed.num_rows == 12
    assert renamed.equals(video_rows(clean, "coffee-1").select(cols))


def test_plan_names_what_was_skipped(named_run):
    _, out, _ = named_run
    plan = pq.read_table(out / "plan.parquet").to_pylist()
    by_video = {r["video"]: r for r in plan}
    assert {d["name"]: d["reason"] for d in by_video["hopper-1"]["ignored"]} == NOT_FRAMES
    assert by_video["hopper-1"]["num_frames"] == 20
    assert all(not r["ignored"] for v, r in by_video.items() if v != "hopper-1")


# --- the same on a copy of the shared sample (real PHOENIX-sized frames) -------------------------
SHARED_VIDEO = "25October_2010_Monday_tagesschau-17"  # 2 frames in dev


@pytest.fixture(scope="module")
def shared_named_run(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("naming-shared")
    root = copy_dataset(shared_sample, tmp / "PHOENIX-2014-T")
    folder = root / FRAMES / "dev" / SHARED_VIDEO
    _add_not_frames(folder)
    _bad_frames(folder, 3)
    args = ["--videos", f"{SHARED_VIDEO},portrait-1", "--workers-per-gpu", "1"]
    runs = []
    for dataset, name in ((root, "bad"), (shared_sample, "clean")):
        proc = run_cli(["run", "--dataset", dataset, "--out", tmp / name, *args])
        assert_no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
        runs.append(read_keypoints(tmp / name))
    return root, runs[0], runs[1]


def test_shared_sample_bad_names(shared_named_run):
    root, got, clean = shared_named_run
    rows = video_rows(got, SHARED_VIDEO).select(["frame", "image", "status"]).to_pylist()
    assert [(r["frame"], r["image"].rsplit("/", 1)[1], r["status"]) for r in rows] == [
        (0, "images0001.png", "ok"), (1, "images0002.png", "ok"),
        (2, "images0003.png", "missing"), (3, "images0004.png", "not_a_file"),
        (4, "images0005.png", UNREADABLE)]
    cols = ["frame", "status", *PARTS]
    assert video_rows(got, SHARED_VIDEO).select(cols).slice(0, 2).equals(
        video_rows(clean, SHARED_VIDEO).select(cols))
    assert same_keypoints(got, clean, "portrait-1")
    for r in video_rows(got, SHARED_VIDEO).slice(0, 2).to_pylist():
        path = root / r["image"]
        assert r["file_size"] == path.stat().st_size
        assert r["file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
