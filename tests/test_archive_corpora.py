"""Every corpus reads from inside an archive as from its folder: CSL-Daily's JPEG folders, a folder
of video files and How2Sign's clips, packed as .tar.gz and .zip in the test from the shared data.
Frames come from the archive source, videos from the video source reading the member in place;
the outputs equal the folder run's but for `image` (+ #archive=NAME for frame files) and mtimes.
A video member cut short costs what the same cut file costs in a folder, and nothing else.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import (
    KEYPOINT_COLUMNS,
    VIDEOS,
    assert_no_traceback,
    build_csl,
    build_how2sign,
    run_cli,
)

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.sources import archive, get
from phoenix_keypoints.extract.sources.base import Ref

SAME = ["split", "video", "frame", "time_s", *KEYPOINT_COLUMNS[1:], "note", "width", "height",
        "file_size", "file_sha256"]


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo")


def pack_tgz(tree: Path, dest: Path, top: str) -> Path:
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(tree, arcname=top)
    return dest


def pack_zip(tree: Path, dest: Path, top: str, method: int = zipfile.ZIP_STORED) -> Path:
    """As `zip -r` packs videos (stored: they do not compress) or with deflate."""
    with zipfile.ZipFile(dest, "w", method) as zf:
        for p in sorted(tree.rglob("*")):
            zf.write(p, f"{top}/{p.relative_to(tree)}")
    return dest


def run(dataset: Path, out: Path) -> Path:
    proc = run_cli(["run", "--dataset", dataset, "--out", out])
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    return out


def same_rows(a: Path, b: Path) -> pq.Table:
    ta, tb = pq.read_table(a / "keypoints.parquet"), pq.read_table(b / "keypoints.parquet")
    assert ta.num_rows == tb.num_rows > 0
    assert ta.select(SAME).equals(tb.select(SAME))
    return ta


# --- CSL-Daily: JPEG frame folders -----------------------------------------------------------------
def test_csl_daily_from_a_tar_gz_equals_its_folder(tmp_path: Path):
    tree = build_csl(tmp_path / "CSL-Daily", frames=3)
    tgz = pack_tgz(tree, tmp_path / "CSL-Daily.tar.gz", "CSL-Daily")
    ds = discover(tgz)
    assert ds.layout == "csl-daily" and {v.source for v in ds.videos} == {"archive"}
    assert [v.translation for v in ds.videos] == [v.translation for v in discover(tree).videos]
    got = same_rows(run(tgz, tmp_path / "a"), run(tree, tmp_path / "f"))
    assert {im.rpartition("#")[2] for im in got["image"].to_pylist()} == {f"archive={tgz.name}"}


def test_a_zip_made_on_macos_is_one_corpus(tmp_path: Path):
    """Finder's zips hold a `__MACOSX/` copy of the tree with a `._name` resource fork per file:
    it is no second corpus, and the corpus lists what its folder lists."""
    tree = build_csl(tmp_path / "CSL-Daily", frames=2)
    dest = pack_zip(tree, tmp_path / "CSL-Daily.zip", "CSL-Daily")
    with zipfile.ZipFile(dest, "a") as zf:
        for p in sorted(tree.rglob("*")):
            if p.is_file():
                rel = p.relative_to(tree)
                zf.writestr(f"__MACOSX/CSL-Daily/{rel.parent}/._{p.name}", b"\x00\x05\x16\x07")
    archive.set_index_dir(None)
    got, want = discover(dest), discover(tree)
    assert got.layout == "csl-daily" and str(got.root) == f"{dest}/CSL-Daily"
    assert [(v.name, v.files) for v in got.videos] == [(v.name, v.files) for v in want.videos]


# --- video files -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train/signer_demo.mp4 and train/cut.mp4 (its first 40%: a download cut short)."""
    root = tmp_path_factory.mktemp("videos") / "clips"
    (root / "train").mkdir(parents=True)
    shutil.copyfile(VIDEOS / "signer_demo.mp4", root / "train" / "signer_demo.mp4")
    data = (VIDEOS / "signer_demo.mp4").read_bytes()
    (root / "train" / "cut.mp4").write_bytes(data[:len(data) * 2 // 5])
    return root


@pytest.fixture(scope="module")
def folder_run(videos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(videos, tmp_path_factory.mktemp("vf") / "run")


@pytest.fixture(scope="module")
def zip_run(videos: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("vz")
    dest = pack_zip(videos, base / "clips.zip", "clips")
    return dest, run(dest, base / "run")


@pytest.mark.slow
def test_videos_from_a_zip_equal_the_folder_run(zip_run: tuple[Path, Path], folder_run: Path):
    """Keypoints, statuses, times and the file's size and sha256 per row are the folder's; the cut
    video has the cut file's statuses (its tail not_decoded), and the whole one all its frames."""
    _, out = zip_run
    got = same_rows(out, folder_run)
    status = {}
    for v, s in zip(got["video"].to_pylist(), got["status"].to_pylist(), strict=True):
        status.setdefault(v, []).append(s)
    assert status["signer_demo"] == ["ok"] * 58
    assert status["cut"] and set(status["cut"]) != {"ok"}  # the cut file's own statuses, as above
    assert all(im.startswith("train/") and "#frame=" in im for im in got["image"].to_pylist())


@pytest.mark.slow
def test_videos_from_a_tar_gz_equal_the_folder_run(videos: Path, folder_run: Path, tmp_path: Path):
    tgz = pack_tgz(videos, tmp_path / "clips.tar.gz", "clips")
    same_rows(run(tgz, tmp_path / "run"), folder_run)


def test_a_deflated_zip_member_decodes_to_the_same_frames(videos: Path, tmp_path: Path):
    """zipfile's own seekable reader serves a deflated member: every frame equals the file's."""
    dest = pack_zip(videos, tmp_path / "deflated.zip", "clips", zipfile.ZIP_DEFLATED)
    archive.set_index_dir(None)
    ds, ref_ds = discover(dest), discover(videos)
    assert [(v.name, v.num_frames, v.problem) for v in ds.videos] == \
        [(v.name, v.num_frames, v.problem) for v in ref_ds.videos]
    v = next(v for v in ds.videos if v.name == "signer_demo")
    got = list(get("video").frames(Path(str(ds.root)), Ref("video", v.folder, (), 0, v.num_frames)))
    want = list(get("video").frames(videos, Ref("video", v.folder, (), 0, v.num_frames)))
    assert [f.status for f in got] == ["ok"] * len(want)
    assert all((a.rgb == b.rgb).all() for a, b in zip(got, want, strict=True))
    assert {f.sha256 for f in got} == {f.sha256 for f in want}


@pytest.mark.slow
def test_verify_and_show_on_a_zip_run(zip_run: tuple[Path, Path], videos: Path, tmp_path: Path):
    """`show` decodes the member again; a zip whose member was replaced is found by `verify`,
    which names that video's rows and no other."""
    dest, out = zip_run
    sheet = tmp_path / "sheet.png"
    proc = run_cli(["show", "--out", out, "--video", "signer_demo", "--to", sheet])
    assert proc.returncode == 0, proc.stderr
    assert "gone" not in proc.stdout + proc.stderr and sheet.stat().st_size > 10_000
    saved = dest.read_bytes()
    try:
        changed = tmp_path / "changed"
        shutil.copytree(videos, changed)
        data = (VIDEOS / "signer_demo.mp4").read_bytes()
        (changed / "train" / "cut.mp4").write_bytes(data[:len(data) // 2])
        pack_zip(changed, dest, "clips")
        proc = run_cli(["verify", "--out", out])
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert_no_traceback(proc)
        assert "cut.mp4" in proc.stdout and "signer_demo.mp4" not in proc.stdout
    finally:
        dest.write_bytes(saved)


# --- How2Sign: clips and the realigned csv ---------------------------------------------------------
def test_how2sign_inside_a_tar_gz_lists_what_its_folder_lists(tmp_path: Path):
    tree = build_how2sign(tmp_path / "how2sign")
    tgz = pack_tgz(tree, tmp_path / "how2sign.tar.gz", "How2Sign")
    archive.set_index_dir(None)
    got, want = discover(tgz), discover(tree)
    assert got.layout == want.layout == "how2sign"
    assert [(v.split, v.name, v.translation, v.num_frames, v.start, v.source) for v in got.videos] \
        == [(v.split, v.name, v.translation, v.num_frames, v.start, v.source) for v in want.videos]
    assert got.unlisted == want.unlisted and got.unlisted
