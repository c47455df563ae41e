"""--dataset FILE.tar.gz (and .tar, .zip): the shared sample packed as the release is packed, read in
place. The whole job on it gives the folder run's keypoints, statuses and order; 1 worker equals 2;
a SIGKILLed run resumes exactly; a changed archive is found and only its chunk redone; damaged
archives cost only what is damaged.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import tarfile
import zipfile
import zlib
from pathlib import Path

import cv2
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers import (
    KEYPOINT_COLUMNS,
    assert_no_traceback,
    assert_same_output,
    popen_cli,
    run_cli,
    temps,
    wait_for,
)

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.corpora.base import DatasetError
from phoenix_keypoints.extract.sources import archive, get
from phoenix_keypoints.extract.sources.base import Ref

TOP = "PHOENIX-2014-T-release-v3"
RUN_ARGS = ["--chunk-frames", "60"]  # as the shared_run fixture
SIGNER = "features/fullFrame-210x260px/train/signer_demo-1"


def pack(tree: Path, dest: Path, mode: str = "w:gz", skip: str = "") -> Path:
    """tree/ packed with TOP/ on top, members in sorted order, as `tar czf` of the release."""
    with tarfile.open(dest, mode) as tf:
        tf.add(tree, arcname=f"{TOP}/PHOENIX-2014-T",
               filter=lambda ti: None if skip and ti.name.endswith(skip) else ti)
    return dest


@pytest.fixture(scope="module")
def tree(shared_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A writable copy of the shared sample (mtimes kept) to pack and change."""
    dest = tmp_path_factory.mktemp("tree") / "PHOENIX-2014-T"
    shutil.copytree(shared_sample, dest)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


@pytest.fixture(scope="module")
def tgz(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack(tree, tmp_path_factory.mktemp("tgz") / f"{TOP}.tar.gz")


@pytest.fixture(scope="module")
def archive_run(tgz: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("arun") / "run"
    proc = run_cli(["run", "--dataset", tgz, "--out", out, *RUN_ARGS])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    return out


@pytest.mark.slow
def test_archive_run_equals_folder_run(archive_run: Path, shared_run: Path, tgz: Path):
    """Same keypoints, statuses and order as the unpacked folder; only `image` (+ #archive=NAME)
    and file_mtime_ns (the tar header's whole seconds) differ; size and sha256 are the files'."""
    a = pq.read_table(archive_run / "keypoints.parquet")
    f = pq.read_table(shared_run / "keypoints.parquet")
    assert a.num_rows == f.num_rows > 100
    assert a.select(["split", "video", *KEYPOINT_COLUMNS, "note", "width", "height"]).equals(
        f.select(["split", "video", *KEYPOINT_COLUMNS, "note", "width", "height"]))
    assert a["file_size"].equals(f["file_size"]) and a["file_sha256"].equals(f["file_sha256"])
    assert pc.all(pc.equal(a["status"], "ok")).as_py()
    assert [im.rpartition("#")[0] for im in a["image"].to_pylist()] == f["image"].to_pylist()
    assert set(im.rpartition("#")[2] for im in a["image"].to_pylist()) == {f"archive={tgz.name}"}
    mt = f["file_mtime_ns"].to_numpy() // 10**9 * 10**9
    assert (a["file_mtime_ns"].to_numpy() == mt).all()
    index = archive.load_index(tgz, archive_run / "archive")
    assert index is not None and index.fmt == "tar.gz" and index.gzip_file.stat().st_size
    assert (archive_run / "archive" / "archive.json").is_file()


def test_legacy_pkl_from_an_archive_run(archive_run: Path, shared_run: Path, tgz: Path,
                                        tmp_path: Path):
    """The older pipeline's pkl of an archive run is the folder run's, but for image_paths, which
    run through the archive file (no `#archive=` tag), so the video and frame are their last parts."""
    got = {}
    for name, run in (("archive", archive_run), ("folder", shared_run)):
        proc = run_cli(["export", "--out", run, "--format", "legacy-pkl", "--to", tmp_path / name])
        assert proc.returncode == 0, proc.stderr
        with open(tmp_path / name, "rb") as f:
            got[name] = pickle.load(f)
    a, f = got["archive"], got["folder"]
    assert a["keypoint_info"] == f["keypoint_info"]
    for split, counts in f["stats"].items():  # total_time is each run's own
        assert {k: v for k, v in a["stats"][split].items() if k != "total_time"} == \
            {k: v for k, v in counts.items() if k != "total_time"}
    for split in ("train", "dev", "test"):
        assert a[split]["video_ids"] == f[split]["video_ids"]
        for x, y in zip(a[split]["keypoints"], f[split]["keypoints"], strict=True):
            assert x.keys() == y.keys()
            for part in x:
                assert (x[part] is None and y[part] is None) or np.array_equal(x[part], y[part])
        folder_root = f["dataset_info"]["source_path"]
        assert [p.replace(a["dataset_info"]["source_path"], "", 1) for p in a[split]["image_paths"]] \
            == [p.replace(folder_root, "", 1) for p in f[split]["image_paths"]]
        assert all(p.startswith(f"{tgz}/") and "#" not in p for p in a[split]["image_paths"])


def test_show_draws_the_archive_frames(archive_run: Path, shared_run: Path, tmp_path: Path):
    """`show` reads the frames back from the archive through the run's index: its contact sheet
    is the folder run's, pixel for pixel (not the grey canvas of a dataset that is gone)."""
    sheets = {}
    for name, run in (("archive", archive_run), ("folder", shared_run)):
        dest = tmp_path / f"{name}.png"
        proc = run_cli(["show", "--out", run, "--video", "signer_demo-1", "--to", dest])
        assert proc.returncode == 0, proc.stderr
        assert "gone" not in proc.stdout + proc.stderr
        sheets[name] = cv2.imread(str(dest))
    assert sheets["archive"] is not None and np.array_equal(sheets["archive"], sheets["folder"])


@pytest.mark.slow
def test_one_worker_equals_two(archive_run: Path, tgz: Path, tmp_path: Path):
    out = tmp_path / "run1"
    proc = run_cli(["run", "--dataset", tgz, "--out", out, *RUN_ARGS, "--workers-per-gpu", "1"])
    assert proc.returncode == 0, proc.stderr
    assert_same_output(out, archive_run)


@pytest.mark.slow
def test_sigkill_then_resume(archive_run: Path, shared_run: Path, tgz: Path, tmp_path: Path):
    """`run --dataset PHOENIX-2014-T-release-v3.tar.gz` (the release's packing) SIGKILLed
    mid-commit, then the same command: it reuses the index and its parts, and its output is the
    uninterrupted archive run's, and the folder run's but for image and mtime."""
    out = tmp_path / "run"
    command = ["run", "--dataset", tgz, "--out", out, *RUN_ARGS]
    proc = popen_cli(command, env={"PHOENIX_KEYPOINTS_FAULTS": "write-delay=2"})
    wait_for(lambda: list((out / "parts").glob("chunk-*.parquet")) and temps(out), 180,
             "a committed part and a part being committed", proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    committed = {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")}
    index_mtime = (out / "archive" / "gzip.index").stat().st_mtime_ns
    again = run_cli(command)
    assert again.returncode == 0, again.stderr
    assert_no_traceback(again)
    for name, mtime in committed.items():
        assert (out / "parts" / name).stat().st_mtime_ns == mtime, f"{name} was redone"
    assert (out / "archive" / "gzip.index").stat().st_mtime_ns == index_mtime, "index built twice"
    assert_same_output(out, archive_run)
    same = ["split", "video", *KEYPOINT_COLUMNS, "note", "width", "height", "file_sha256"]
    assert pq.read_table(out / "keypoints.parquet").select(same).equals(
        pq.read_table(shared_run / "keypoints.parquet").select(same))


def test_index_of_an_older_version_is_made_again_on_resume(archive_run: Path, tmp_path: Path):
    """A run folder whose index an older version wrote (another members.parquet layout) is
    finished by `run`: the index is made again, no part is redone, the output is the same."""
    out = tmp_path / "run"
    shutil.copytree(archive_run, out)
    meta_path = out / "archive" / "archive.json"
    meta = json.loads(meta_path.read_text())
    meta["version"] = archive.INDEX_VERSION - 1
    meta_path.write_text(json.dumps(meta))
    parts = {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")}
    proc = run_cli(["run", "--out", out])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    assert json.loads(meta_path.read_text())["version"] == archive.INDEX_VERSION
    assert {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")} == parts
    assert pq.read_table(out / "keypoints.parquet").equals(
        pq.read_table(archive_run / "keypoints.parquet"))


@pytest.mark.slow
def test_changed_archive_found_and_only_its_chunk_redone(archive_run: Path, tree: Path, tgz: Path,
                                                         tmp_path: Path):
    """The archive replaced by one in which one frame differs: verify names that frame, `run`
    indexes the archive again and redoes that frame's chunk only; the rest stays as it was."""
    work = tmp_path / "tree" / "PHOENIX-2014-T"
    shutil.copytree(tree, work, copy_function=shutil.copy2)
    out = tmp_path / "run"
    shutil.copytree(archive_run, out)
    frame = work / SIGNER / "images0010.png"
    frame.write_bytes((work / SIGNER / "images0011.png").read_bytes())
    os.utime(frame, ns=(frame.stat().st_atime_ns, frame.stat().st_mtime_ns + 5 * 10**9))
    saved, saved_ns = tgz.read_bytes(), tgz.stat().st_mtime_ns
    try:  # the archive the run names, replaced in place (and put back for the other tests)
        pack(work, tgz)
        v = run_cli(["verify", "--out", out])
        assert v.returncode == 1, v.stderr
        lines = v.stdout.splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"signer_demo-1\t9\t{SIGNER}/images0010.png#archive={tgz.name}\t"), v.stdout
        parts = {p.name: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")}
        again = run_cli(["run", "--out", out])
        assert again.returncode == 0, again.stderr
        assert_no_traceback(again)
        redone = [n for n, m in parts.items() if (out / "parts" / n).stat().st_mtime_ns != m]
        assert len(redone) == 1, redone
        got = pq.read_table(out / "keypoints.parquet")
        row = got.filter(pc.and_(pc.equal(got["video"], "signer_demo-1"), pc.equal(got["frame"], 9)))
        assert row["file_sha256"][0].as_py() == hashlib.sha256(frame.read_bytes()).hexdigest()
        assert run_cli(["verify", "--out", out]).returncode == 0
    finally:
        tgz.write_bytes(saved)
        os.utime(tgz, ns=(saved_ns, saved_ns))


@pytest.mark.slow
def test_status_names_what_a_changed_archive_lost_as_verify_does(tree: Path, tmp_path: Path,
                                                                  wholebody_options: list[str]):
    """The archive replaced by one without a frame: `status` lists it again (reading the archive
    through, as verify does, keeping the index in memory) and names the change in verify's words;
    the run folder's archive index is left as it was."""
    tgz = pack(tree, tmp_path / f"{TOP}.tar.gz")
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", tgz, "--out", out, *wholebody_options])
    assert proc.returncode == 0, proc.stderr
    index = {p.name: p.read_bytes() for p in (out / "archive").iterdir()}
    pack(tree, tgz, skip="signer_demo-1/images0010.png")
    summary = "1 video(s) with other frames (+0/-1 frames: train/signer_demo-1 (-1 frame(s)))"
    status = run_cli(["status", "--out", out])
    assert_no_traceback(status)
    assert f"corpus:   changed since planned: {summary}" in status.stdout, status.stdout
    verify = run_cli(["verify", "--out", out])
    assert verify.returncode == 1 and summary in verify.stderr, verify.stderr
    assert {p.name: p.read_bytes() for p in (out / "archive").iterdir()} == index


# --- the source alone, on each format -----------------------------------------------------------
def _frames(root: Path, video: str = SIGNER) -> list:
    ds = discover(root, videos=[Path(video).name])
    v = ds.videos[0]
    return list(get(v.source).frames(Path(str(ds.root)), Ref(v.source, v.folder, v.files)))


@pytest.mark.parametrize("fmt", ["w:gz", "w", "zip"])
def test_each_format_reads_the_files_bytes(fmt: str, tree: Path, tmp_path: Path):
    """Every frame read from the archive is the file's bytes (sha256), in the folder's order."""
    archive.set_index_dir(None)
    if fmt == "zip":
        dest = tmp_path / "corpus.zip"
        with zipfile.ZipFile(dest, "w") as zf:  # stored: PNG does not compress
            for p in sorted(tree.rglob("*")):
                zf.write(p, f"{TOP}/PHOENIX-2014-T/{p.relative_to(tree)}")
    else:
        dest = pack(tree, tmp_path / ("corpus.tgz" if fmt == "w:gz" else "corpus.tar"), fmt)
    frames = _frames(dest)
    files = sorted((tree / SIGNER).glob("*.png"), key=lambda p: int(p.stem[6:]))
    assert [f.status for f in frames] == ["ok"] * len(files)
    assert [f.sha256 for f in frames] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
    assert [f.image.rpartition("#")[0] for f in frames] == [f"{SIGNER}/{p.name}" for p in files]


def pack_shuffled(tree: Path, dest: Path) -> Path:
    """tree packed as `tar` may store it: folders in reverse name order and each folder's files in
    a shuffled (seeded) order, not the frames' order."""
    rng = random.Random(19)
    with tarfile.open(dest, "w:gz") as tf:
        def add(p: Path) -> None:
            tf.add(p, arcname=f"{TOP}/PHOENIX-2014-T/{p.relative_to(tree)}".rstrip("/."),
                   recursive=False)
            if p.is_dir():
                children = sorted(p.iterdir())
                files = [c for c in children if not c.is_dir()]
                rng.shuffle(files)
                for c in files + sorted((c for c in children if c.is_dir()), reverse=True):
                    add(c)
        add(tree)
    return dest


@pytest.fixture(scope="module")
def shuffled(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_shuffled(tree, tmp_path_factory.mktemp("shuffled") / f"{TOP}.tar.gz")


def test_reads_run_forward_through_a_shuffled_archive(shuffled: Path, tree: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    """Members stored out of frame order are read in archive order (offsets only grow), and the
    frames still come in frame order with the files' bytes; a chunk's videos are taken in the
    order they lie in the archive."""
    archive.set_index_dir(None)
    offsets: list[int] = []
    real_read = archive._Reader.read

    def recording_read(self, i: int):  # the real read, its offset noted
        offsets.append(int(self.index.offset[i]))
        return real_read(self, i)

    monkeypatch.setattr(archive._Reader, "read", recording_read)
    ds = discover(shuffled)
    v = next(v for v in ds.videos if f"{v.folder}" == SIGNER)
    offsets.clear()  # the corpus files read by discover
    frames = list(get(v.source).frames(Path(str(ds.root)), Ref(v.source, v.folder, v.files)))
    files = sorted((tree / SIGNER).glob("*.png"), key=lambda p: int(p.stem[6:]))
    assert [f.sha256 for f in frames] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
    assert len(offsets) == len(files) and offsets == sorted(offsets)
    index = archive.open_index(shuffled)
    stored = [index.offset[index.find(f"{TOP}/PHOENIX-2014-T/{SIGNER}/{p.name}")] for p in files]
    assert stored != sorted(stored), "the archive was meant to hold the frames out of order"
    refs = [Ref(v.source, v.folder, v.files) for v in ds.videos if v.split == "train"]
    order = get("archive").read_order(Path(str(ds.root)), refs)
    assert order == list(range(len(refs)))[::-1]  # the folders were packed in reverse name order


@pytest.mark.slow
def test_shuffled_archive_run_equals_folder_run(shuffled: Path, shared_run: Path, tmp_path: Path):
    """Reading in archive order changes nothing in the output: rows, order and keypoints are the
    folder run's (one chunk of every video, taken in the archive's order: plan order reversed)."""
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", shuffled, "--out", out, "--chunk-frames", "100000",
                    "--workers-per-gpu", "1"])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    a = pq.read_table(out / "keypoints.parquet")
    f = pq.read_table(shared_run / "keypoints.parquet")
    cols = ["split", "video", *KEYPOINT_COLUMNS, "note", "width", "height", "file_size",
            "file_sha256"]
    assert a.num_rows == f.num_rows > 100 and a.select(cols).equals(f.select(cols))


class _Unseekable(io.RawIOBase):
    """A pipe-like output: zipfile then writes each member's sizes and CRC after its data."""

    def __init__(self, f) -> None:
        self.f = f

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return self.f.write(b)


@pytest.mark.parametrize("how", ["deflated", "streamed", "bzip2"])
def test_zips_as_other_tools_write_them(how: str, tree: Path, tmp_path: Path):
    """Deflated members, a zip written to a pipe (sizes and CRC in data descriptors after each
    member) and bzip2 members (read through zipfile) all give the files' bytes, in order."""
    archive.set_index_dir(None)
    dest = tmp_path / "corpus.zip"
    method = zipfile.ZIP_BZIP2 if how == "bzip2" else zipfile.ZIP_DEFLATED
    with open(dest, "wb") as raw, \
            zipfile.ZipFile(_Unseekable(raw) if how == "streamed" else raw, "w", method) as zf:
        for p in sorted(tree.rglob("*")):
            if p.is_file():
                zf.write(p, f"{TOP}/PHOENIX-2014-T/{p.relative_to(tree)}")
    if how == "streamed":
        with zipfile.ZipFile(dest) as zf:
            assert all(zi.flag_bits & 0x8 for zi in zf.infolist())
    frames = _frames(dest)
    files = sorted((tree / SIGNER).glob("*.png"), key=lambda p: int(p.stem[6:]))
    assert [f.status for f in frames] == ["ok"] * len(files)
    assert [f.sha256 for f in frames] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in files]
    # the central directory is parsed (zipfile) only for a compression the reader does not do
    assert (archive.reader(archive.open_index(dest)).zf is None) == (how != "bzip2")


# --- bad input ----------------------------------------------------------------------------------
def test_truncated_archive(tgz: Path, tree: Path, tmp_path: Path):
    """Cut in the middle: indexed as far as it reads; the videos beyond have no folder; the run's
    warning says where it ends and what to do; the frames before are read whole."""
    archive.set_index_dir(None)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(tgz.read_bytes()[: tgz.stat().st_size * 2 // 3])
    ds = discover(cut)
    assert "truncated or damaged" in ds.root.index.problem
    problems = {v.name: v.problem for v in ds.videos}
    assert problems["signer_demo-1"] in ("no folder", "the archive ends inside its frames (truncated)")
    ok = [v for v in ds.videos if not v.problem]
    assert ok, problems
    for v in ok:  # whole, never planned with fewer frames than the folder has
        assert list(v.files) == sorted(p.name for p in (tree / v.folder).glob("*.png"))
        got = list(get(v.source).frames(Path(str(ds.root)), Ref(v.source, v.folder, v.files)))
        assert {f.status for f in got} <= {"ok", "unreadable"}, [f.note for f in got]
    proc = run_cli(["run", "--dataset", cut, "--out", tmp_path / "run", "--videos", "portrait-1"])
    assert_no_traceback(proc)
    assert "probably truncated or damaged" in proc.stderr and "download the archive again" in \
        proc.stderr, proc.stderr


def _compressed_offset(gz: bytes, target: int) -> int:
    """Where in a gzip file the byte `target` of its uncompressed stream is encoded (to 4 KiB)."""
    d, out = zlib.decompressobj(wbits=31), 0
    for at in range(0, len(gz), 4096):
        out += len(d.decompress(gz[at:at + 4096]))
        if out > target:
            return at
    raise AssertionError("target past the end")


def test_corrupt_block_inside_one_member(tgz: Path, tmp_path: Path):
    """Bit rot after indexing: bytes flipped inside the deflate data of one frame of signer_demo-1
    (size and mtime kept). The frames from there to the next seek point of the index are
    unreadable or corrupt_png (gzip cannot resync sooner), each with its reason; every frame of the
    other videos, and of signer_demo-1 before the damage, is read whole."""
    bad = tmp_path / "bad.tar.gz"
    shutil.copy2(tgz, bad)
    archive.set_index_dir(tmp_path / "index")
    before = {v.name: _frames(bad, v.folder) for v in discover(bad).videos}
    index = archive.open_index(bad)
    member = index.find(f"{TOP}/PHOENIX-2014-T/{SIGNER}/images0030.png")
    raw = bytearray(bad.read_bytes())
    at = _compressed_offset(bytes(raw), int(index.offset[member]) + int(index.length[member]) // 2)
    raw[at:at + 64] = bytes(b ^ 0x5A for b in raw[at:at + 64])
    mtime = bad.stat().st_mtime_ns
    bad.write_bytes(bytes(raw))
    os.utime(bad, ns=(mtime, mtime))
    archive._INDEXES.clear()
    after = {name: _frames(bad, [f for f in before[name]][0].image.rpartition("/")[0])
             for name in before}
    hurt = [i for i, f in enumerate(after["signer_demo-1"]) if f.status != "ok"]
    assert hurt and hurt[0] <= 29 < hurt[-1] + 1, hurt
    assert all(after["signer_demo-1"][i].note or after["signer_demo-1"][i].status == "corrupt_png"
               for i in hurt)
    for i, f in enumerate(after["signer_demo-1"]):
        if i not in hurt:
            assert f.sha256 == before["signer_demo-1"][i].sha256
    for name, frames in after.items():
        if name != "signer_demo-1":
            assert [f.sha256 for f in frames] == [f.sha256 for f in before[name]], name
    archive.set_index_dir(None)


def test_zip_member_with_damaged_bytes(tree: Path, tmp_path: Path):
    """A zip frame whose stored bytes rotted (same size and mtime): its CRC-32 says so, the row is
    `unreadable` with that reason, and every other frame is read whole."""
    archive.set_index_dir(None)
    dest = tmp_path / "corpus.zip"
    with zipfile.ZipFile(dest, "w") as zf:
        for p in sorted(tree.rglob("*")):
            if p.is_file():
                zf.write(p, f"{TOP}/PHOENIX-2014-T/{p.relative_to(tree)}")
    index = archive.open_index(dest)
    member = index.find(f"{TOP}/PHOENIX-2014-T/{SIGNER}/images0030.png")
    before = _frames(dest)
    raw = bytearray(dest.read_bytes())
    at = int(index.offset[member]) + 200  # inside the data, past the local header
    raw[at:at + 8] = bytes(b ^ 0x5A for b in raw[at:at + 8])
    mtime = dest.stat().st_mtime_ns
    dest.write_bytes(bytes(raw))
    os.utime(dest, ns=(mtime, mtime))
    archive._INDEXES.clear()
    after = _frames(dest)
    assert [i for i, f in enumerate(after) if f.status != "ok"] == [29]
    assert after[29].status == "unreadable" and "CRC-32" in after[29].note
    assert [f.sha256 for i, f in enumerate(after) if i != 29] == \
        [f.sha256 for i, f in enumerate(before) if i != 29]


def test_member_that_is_not_a_png(tree: Path, tmp_path: Path):
    work = tmp_path / "t" / "PHOENIX-2014-T"
    shutil.copytree(tree, work)
    (work / SIGNER / "images0005.png").write_text("not an image\n")
    archive.set_index_dir(None)
    frames = _frames(pack(work, tmp_path / "np.tar.gz"))
    assert [f.status for f in frames].count("not_png") == 1
    assert frames[4].status == "not_png" and frames[4].sha256 is not None
    assert {f.status for i, f in enumerate(frames) if i != 4} == {"ok"}


def test_two_corpora_or_none_refused(tree: Path, tmp_path: Path):
    """Refused at once (exit 2), saying what the archive holds and what to pass instead."""
    two = tmp_path / "two.tar.gz"
    with tarfile.open(two, "w:gz") as tf:
        for top in ("a", "b"):
            tf.add(tree / "annotations", arcname=f"{top}/PHOENIX-2014-T/annotations")
    proc = run_cli(["run", "--dataset", two, "--out", tmp_path / "r2"])
    assert proc.returncode == 2, proc.stderr
    assert_no_traceback(proc)
    assert "holds 2 corpora" in proc.stderr and f"{two}/a/PHOENIX-2014-T" in proc.stderr
    none = tmp_path / "none.tar.gz"
    with tarfile.open(none, "w:gz") as tf:
        data = b"hello\n"
        ti = tarfile.TarInfo("readme.txt")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    proc = run_cli(["run", "--dataset", none, "--out", tmp_path / "r0"])
    assert proc.returncode == 2, proc.stderr
    assert "no corpus inside the archive" in proc.stderr and "readme.txt" in proc.stderr
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not gzip at all" * 10)
    proc = run_cli(["run", "--dataset", junk, "--out", tmp_path / "rj"])
    assert proc.returncode == 2, proc.stderr
    assert_no_traceback(proc)
    assert str(junk) in proc.stderr


def test_archives_not_read_in_place_say_how_to_repack(tree: Path, tmp_path: Path):
    """A .tar.xz / .tar.bz2 is named for what it is, with a command that makes a .tar.gz of it;
    that command's output is read (corpus found) without unpacking."""
    for mode, suffix, tool in (("w:xz", ".tar.xz", "xz"), ("w:bz2", ".tar.bz2", "bzip2")):
        packed = pack(tree, tmp_path / f"release{suffix}", mode)
        proc = run_cli(["run", "--dataset", packed, "--out", tmp_path / f"r{tool}"])
        assert proc.returncode == 2, proc.stderr
        assert_no_traceback(proc)
        command = f"`{tool} -dc release{suffix} | gzip > release.tar.gz`"
        assert f"{packed} is {'an' if tool == 'xz' else 'a'} {tool}-compressed tar" in proc.stderr
        assert command in proc.stderr
        if shutil.which(tool):
            subprocess.run(command.strip("`"), shell=True, cwd=tmp_path, check=True)
            ds = discover(tmp_path / "release.tar.gz", limit_videos=1)
            assert ds.layout.startswith("phoenix") and ds.videos and ds.num_frames


def test_slurm_plans_one_shared_index(tgz: Path, tmp_path: Path):
    """`slurm` (without --submit) plans on the login node: the index is in the run folder, and a
    shard loading the plan finds it valid instead of reading the archive again."""
    out = tmp_path / "run"
    proc = run_cli(["slurm", "--dataset", tgz, "--out", out, "--num-shards", "2"])
    assert proc.returncode == 0, proc.stderr
    index = archive.load_index(tgz, out / "archive")
    assert index is not None and index.members.num_rows > 140
    with pytest.raises(DatasetError, match="no folder"):
        discover(Path(f"{tgz}/{TOP}/nothing-here"))
