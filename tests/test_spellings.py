"""One input however it is spelt, and names that hold `#`, `%`, `=`, spaces or non-ASCII.

A run planned with one spelling of its input (a symlink, `..`, an archive alone or a folder in it,
the older `--dataset_path`) resumes with another spelling of the same input; another input is
refused, naming both as typed. A row's `image` keeps the archive, the member and the frame number
apart whatever the names hold: verify, show, report, resume and the legacy pkl read them back.
"""

from __future__ import annotations

import json
import pickle
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import SHARED_SAMPLE, VIDEOS, assert_no_traceback, run_cli
from kinds import manifest, pack, phoenix_t

from phoenix_keypoints.extract.families.holistic.legacy import _image_path
from phoenix_keypoints.extract.sources import load_image

pytestmark = pytest.mark.slow
OPTIONS = ["--workers-per-gpu", "1"]


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not (SHARED_SAMPLE / "annotations").is_dir() or not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


def run(args: list, cwd: Path, code: int = 0):
    proc = run_cli(["run", *map(str, args), *OPTIONS], cwd=cwd)
    assert_no_traceback(proc)
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


RELEASE = "PHOENIX-2014-T-release-v3"


def release(tmp: Path) -> Path:
    """The tiny tree packed as the release is: two folders down in a tar.gz."""
    tree = phoenix_t(tmp / "tree")
    return pack(tree, tmp / f"{RELEASE}.tar.gz", f"{RELEASE}/PHOENIX-2014-T")


def link(tmp: Path, target: Path, name: str) -> str:
    (tmp / name).symlink_to(target)
    return name


# Each builds its input once in the test folder and gives (words planned with, words resumed with).
SPELLINGS = {
    "archive through a symlink": lambda t: (["--dataset", link(t, release(t), "data.tgz")],
                                            ["--dataset", "data.tgz"]),
    "symlink, then the archive's own name": lambda t: (["--dataset", link(t, release(t), "d")],
                                                       ["--dataset", f"{RELEASE}.tar.gz"]),
    "archive with .. in its path": lambda t: (["--dataset", f"tree/../{release(t).name}"],) * 2,
    "ARCHIVE/inner, then the archive alone": lambda t: (
        ["--dataset", f"{release(t).name}/{RELEASE}/PHOENIX-2014-T"],
        ["--dataset", f"{RELEASE}.tar.gz"]),
    "the archive alone, then its top folder": lambda t: (
        ["--dataset", release(t).name], ["--dataset", f"{RELEASE}.tar.gz/{RELEASE}"]),
    "relative, then absolute": lambda t: (["--dataset", release(t).name],
                                          ["--dataset", t / f"{RELEASE}.tar.gz"]),
    "manifest through a symlink of another name": lambda t: (
        ["--manifest", link(t, manifest(t), "mine.csv")], ["--manifest", "mine.csv"]),
    "the older command line": lambda t: (
        ["--dataset_path", release(t).name, "--output_path", "keypoints.pkl"],
        ["--dataset_path", f"{RELEASE}.tar.gz", "--output_path", "keypoints.pkl"]),
}


@pytest.mark.parametrize("spelling", SPELLINGS.values(), ids=list(SPELLINGS))
def test_the_same_input_however_spelt_resumes(spelling, tmp_path: Path):
    planned, resumed = spelling(tmp_path)
    out = [] if "--output_path" in planned else ["--out", "R"]
    run([*planned, *out], tmp_path)
    folder = tmp_path / ("R" if out else "keypoints_run")
    stamps = {p: p.stat().st_mtime_ns for p in [*folder.rglob("*"), *tmp_path.glob("*.pkl")]
              if p.is_file()}
    again = run([*resumed, *out], tmp_path)
    assert "complete:" in again.stdout, again.stdout
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_another_input_is_refused_in_the_users_words(tmp_path: Path):
    tgz = release(tmp_path)
    other = phoenix_t(tmp_path / "other")
    run(["--dataset", tgz.name, "--out", "R"], tmp_path)
    proc = run(["--dataset", "other/PHOENIX-2014-T", "--out", "R"], tmp_path, code=2)
    assert (f"other dataset ({RELEASE}.tar.gz when planned, "
            "other/PHOENIX-2014-T asked)") in proc.stderr
    assert "--fresh --dataset other/PHOENIX-2014-T`" in proc.stderr, proc.stderr
    assert other.is_dir()


@pytest.mark.parametrize("layout", ["csl-daily", "manifest"])
def test_refusals_name_the_runs_own_input_as_given(layout: str, tmp_path: Path):
    """A refusal given no input names the run's own with its flag, as typed when planned (was:
    the kind's placeholder, `--dataset CSL_DAILY_ROOT`, `--manifest FILE`)."""
    from helpers import build_csl

    given = build_csl(tmp_path / "CSL") if layout == "csl-daily" else manifest(tmp_path)
    flag = "--manifest" if layout == "manifest" else "--dataset"
    run([flag, given.relative_to(tmp_path), "--out", tmp_path / "R"], tmp_path)
    proc = run_cli(["slurm", "--out", tmp_path / "R", "--num-shards", "3"])
    assert proc.returncode == 2 and "other num_shards" in proc.stderr, proc.stderr
    assert f"--fresh {flag} {given.relative_to(tmp_path)}`" in proc.stderr, proc.stderr


# --- names that hold the characters the image string is made of -------------------------------------
@pytest.mark.parametrize("text", ["a#b.tar.gz", "x%23y", "s p=a#ce", "naïve#frame=1"])
def test_image_refs_survive_any_name(text: str):
    from phoenix_keypoints.extract.sources.base import image_ref, parse_image

    for ref in (image_ref(f"dir/{text}/f.png"), image_ref(f"{text}.mp4", "frame", "12"),
                image_ref(f"{text}/f.png", "archive", text)):
        path, fragment, detail = parse_image(ref)
        assert ref.count("#") <= 1
        assert image_ref(path, fragment, detail) == ref
    assert parse_image(image_ref(f"{text}/f.png", "archive", text)) == (f"{text}/f.png", "archive", text)
    assert image_ref("plain/images0001.png") == "plain/images0001.png"  # old rows read as before


NAMES = {"hash": ("V#frame=1", "a#b"), "percent and =": ("V%23=2", "c%41=d"),
         "spaces, non-ASCII": ("Vidéo 1 ü", "arch ï v")}


@pytest.mark.parametrize("archived", [False, True], ids=["folder", "archive"])
@pytest.mark.parametrize("video, archive_name", NAMES.values(), ids=list(NAMES))
def test_names_with_tag_characters(video: str, archive_name: str, archived: bool, tmp_path: Path):
    """A PHOENIX video folder (and the archive holding the tree) named with `#`, `%`, `=`, spaces
    and non-ASCII: verify finds every frame, show and report draw them, a resume redoes nothing,
    the legacy pkl names the real files."""
    root = phoenix_t(tmp_path / "tree")
    old, frames = "signer_demo-1", root / "features/fullFrame-210x260px/train"
    (frames / old).rename(frames / video)
    csv = root / "annotations/manual/PHOENIX-2014-T.train.corpus.csv"
    csv.write_text(csv.read_text().replace(old, video))
    dataset = root
    if archived:
        dataset = tmp_path / f"{archive_name}.tar.gz"
        with tarfile.open(dataset, "w:gz") as tf:
            tf.add(root, "PHOENIX-2014-T")
    out = tmp_path / "R"
    run(["--dataset", dataset, "--out", out, "--output_path", tmp_path / "k.pkl"], tmp_path)
    table = pq.read_table(out / "keypoints.parquet")
    rows = table.filter(table["video"].to_numpy(zero_copy_only=False) == video)
    assert rows.num_rows == 4
    root_now = Path(json.loads((out / "run.json").read_text())["dataset"]["root"])
    spelled = Path(dataset) / "PHOENIX-2014-T" if archived else root  # the corpus, as typed
    for image in rows["image"].to_pylist():
        assert load_image(root_now, image) is not None, image
        path = image.partition("#")[0].replace("%23", "#").replace("%25", "%")  # as documented
        assert path.startswith(f"features/fullFrame-210x260px/train/{video}/images000")
        # the legacy pkl's path: the real file, through the archive as --dataset named it
        legacy = Path(_image_path(str(spelled), image))
        assert legacy == spelled / path
        assert archived or legacy.is_file()

    verify = run_cli(["verify", "--out", out])
    assert verify.returncode == 0, verify.stdout + verify.stderr
    show = run_cli(["show", "--out", out, "--video", video, "--to", tmp_path / "s.png"])
    assert show.returncode == 0 and "grey" not in show.stderr, show.stderr
    report = run_cli(["report", "--out", out])
    assert report.returncode == 0, report.stderr

    parts = {p: p.stat().st_mtime_ns for p in (out / "parts").glob("chunk-*.parquet")}
    (out / "keypoints.parquet").unlink()  # a merge is needed: the resume checks every part
    run(["--dataset", dataset, "--out", out], tmp_path)
    assert {p: p.stat().st_mtime_ns for p in parts} == parts, "a resume redid chunks"

    data = pickle.loads((tmp_path / "k.pkl").read_bytes())
    for p in data["train"]["image_paths"]:  # the frames with anything detected: real files too
        assert Path(p).relative_to(spelled)
        assert archived or Path(p).is_file(), p
