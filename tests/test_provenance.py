"""Every row records what it was made from (size, mtime, sha256 of the bytes read), and
extract.sources.provenance names the frames on disk that no longer match, and why. Files are changed on
disk for real, including the hard case: same size, old mtime put back."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa
import pytest
from helpers import copy_dataset, pad_png, read_keypoints

from phoenix_keypoints.extract.families.holistic.declaration import SCHEMA
from phoenix_keypoints.extract.keypoints.frames import read_file, read_frame
from phoenix_keypoints.extract.keypoints.schema import PROVENANCE_COLUMNS
from phoenix_keypoints.extract.sources.provenance import Mismatch, changed_frames, stat_frames


def _recorded(run: Path) -> pa.Table:
    return read_keypoints(run).select(list(PROVENANCE_COLUMNS))


def test_rows_hold_the_true_size_mtime_and_sha256(clean_run: Path, sample_root: Path):
    table = read_keypoints(clean_run)
    assert table.schema.remove_metadata().equals(SCHEMA)
    rows = table.select(["status", *PROVENANCE_COLUMNS]).to_pylist()
    assert len(rows) == 82
    for r in rows:
        path = sample_root / r["image"]
        st = path.stat()
        assert r["status"] == "ok"
        assert (r["file_size"], r["file_mtime_ns"]) == (st.st_size, st.st_mtime_ns)
        assert r["file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest(), r["image"]


def test_read_frame_reports_the_bytes_it_decoded(sample_root: Path, tmp_path: Path):
    frame = next((sample_root / "features").rglob("images0001.png"))
    rgb, status, _, source = read_frame(frame)
    assert status == "ok" and rgb is not None
    assert source.sha256 == hashlib.sha256(frame.read_bytes()).hexdigest()
    assert read_frame(frame, digest=False)[3].sha256 is None
    (tmp_path / "empty.png").write_bytes(b"")  # read, but nothing to decode: provenance kept
    _, status, _, source = read_frame(tmp_path / "empty.png")
    assert status == "empty_file" and source.size == 0
    assert source.sha256 == hashlib.sha256(b"").hexdigest()
    os.mkfifo(tmp_path / "fifo.png")  # must be reported, not waited on
    assert read_file(tmp_path / "fifo.png")[2:] == ("not_a_file", "a FIFO")


def same_size_png(picture: np.ndarray, size: int) -> bytes:
    """Another valid PNG of exactly `size` bytes: `picture` encoded, padded with a tEXt chunk."""
    ok, buf = cv2.imencode(".png", picture)
    assert ok
    return pad_png(buf.tobytes(), size)


@pytest.fixture()
def changed_copy(sample_root: Path, clean_run: Path, tmp_path: Path):
    """A copy of the sample (mtimes kept) with frames changed in every way a user could."""
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T")
    recorded = _recorded(clean_run)
    assert changed_frames(root, recorded) == [], "an untouched copy matches (mtimes copied)"
    images = recorded["image"].to_pylist()
    gray = np.full((260, 210, 3), 128, np.uint8)
    pick = {"new_mtime": 3, "old_mtime": 30, "shorter": 50, "gone": 60, "dir": 70}
    for what, i in pick.items():
        path = root / images[i]
        st = path.stat()
        if what in ("new_mtime", "old_mtime"):
            path.write_bytes(same_size_png(gray, st.st_size))
            assert path.stat().st_size == st.st_size
            if what == "old_mtime":
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            else:
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        elif what == "shorter":
            path.write_bytes(path.read_bytes()[:1000])
        elif what == "gone":
            path.unlink()
        else:
            path.unlink()
            path.mkdir()
    sizes = recorded["file_size"].to_pylist()
    return root, recorded, images, pick, sizes


def test_stat_names_every_change_it_can_see(changed_copy):
    root, recorded, images, pick, sizes = changed_copy
    got = changed_frames(root, recorded)
    assert got == [
        Mismatch(pick["new_mtime"], images[pick["new_mtime"]], "modified"),
        Mismatch(pick["shorter"], images[pick["shorter"]], f"size {sizes[pick['shorter']]} -> 1000"),
        Mismatch(pick["gone"], images[pick["gone"]], "missing"),
        Mismatch(pick["dir"], images[pick["dir"]], "not a file any more"),
    ]


def test_content_finds_same_size_with_old_mtime(changed_copy):
    root, recorded, images, pick, _ = changed_copy
    got = {m.row: m.why for m in changed_frames(root, recorded, content=True)}
    assert got[pick["old_mtime"]] == "content differs"
    assert got[pick["new_mtime"]] == "modified"
    assert set(got) == set(pick.values())
    assert changed_frames(root, recorded, content=True, threads=1) == \
        changed_frames(root, recorded, content=True, threads=8)


def test_many_rows_in_batches(changed_copy):
    """More rows than one stat batch: row numbers stay right in every batch."""
    root, recorded, images, pick, _ = changed_copy
    many = pa.concat_tables([recorded] * 40)  # 3,280 rows
    got = changed_frames(root, many)
    n = recorded.num_rows
    expected_rows = sorted(i + k * n for k in range(40)
                           for i in (pick["new_mtime"], pick["shorter"], pick["gone"], pick["dir"]))
    assert [m.row for m in got] == expected_rows
    stats = stat_frames([str(root / im) for im in many["image"].to_pylist()], threads=4)
    assert len(stats.kind) == many.num_rows and stats.size[pick["new_mtime"] + n] > 0


def test_rows_made_from_nothing(tmp_path: Path, sample_root: Path):
    """A row recorded as unreadable stays matched while its file stays unreadable, and is named
    once the file can be read."""
    (tmp_path / "a.png").symlink_to(tmp_path / "nowhere.png")
    (tmp_path / "b.png").mkdir()
    recorded = pa.table({"image": ["a.png", "b.png"], "file_size": pa.nulls(2, pa.int64()),
                         "file_mtime_ns": pa.nulls(2, pa.int64()),
                         "file_sha256": pa.nulls(2, pa.string())})
    assert changed_frames(tmp_path, recorded, content=True) == []
    (tmp_path / "nowhere.png").write_bytes(b"\x89PNG" + bytes(96))
    assert changed_frames(tmp_path, recorded) == [
        Mismatch(0, "a.png", "was not readable, now a file of 100 bytes")]


def test_a_whole_folder_gone(sample_root: Path, clean_run: Path, tmp_path: Path):
    root = copy_dataset(sample_root, tmp_path / "PHOENIX-2014-T")
    recorded = _recorded(clean_run)
    folder = root / "features/fullFrame-210x260px/test/coffee-1"
    folder.rename(folder.with_name("elsewhere"))
    got = changed_frames(root, recorded)
    images = recorded["image"].to_pylist()
    assert [m.image for m in got] == [im for im in images if "/coffee-1/" in im]
    assert {m.why for m in got} == {"missing"} and len(got) == 12
