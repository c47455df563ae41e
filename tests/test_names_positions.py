"""A name in any position is data (issue 37 item 4): not only inside folders (tests/test_names.py)
but the dataset argument, the subfolders of a folder of frame folders, a one-video or one-folder
input, an archive's own file name, frame numbers, glob characters, bidi and zero-width characters,
manifest values. Each test builds the corpus on disk and meets it with the real command line.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import PHX_FRAMES, VIDEOS, assert_no_traceback, run_cli, sha256
from kinds import clip, frame_folders, pack, phoenix_t
from test_names import plan, planned

from phoenix_keypoints.jobs.messages import terminal


@pytest.fixture(scope="module", autouse=True)
def _shared() -> None:
    if not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")


def odd(path: Path, name: bytes) -> Path:
    """path / name, for a name whose bytes are no UTF-8."""
    return Path(os.fsdecode(os.fsencode(path) + b"/" + name))


def keypoints(out: Path) -> list[dict]:
    return pq.read_table(out / "keypoints.parquet", columns=["video", "frame", "image", "status",
                                                             "file_sha256"]).to_pylist()


# --- bytes that are no UTF-8, in the positions issue 30 left ----
def test_a_subfolder_of_a_folder_of_frame_folders_that_is_no_utf8(tmp_path: Path,
                                                                   wholebody_options: list[str]):
    """A folder of frame folders holding `bad\\xff/` beside the two good ones: that subfolder is
    skipped and named, the others extracted (before: a traceback, nothing extracted)."""
    root = frame_folders(tmp_path)
    shutil.copytree(root / "signer_demo-1", odd(root, b"bad\xff"))
    out = tmp_path / "out"
    proc = run_cli(["run", "--dataset", root, "--out", out, "--workers-per-gpu", "1",
                    *wholebody_options])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert "bad\\udcff (its name is not UTF-8: rename it to read it)" in proc.stderr, proc.stderr
    videos = [r["video"] for r in keypoints(out)]
    assert sorted(set(videos)) == ["25October_2010_Monday_tagesschau-17", "signer_demo-1"]
    assert len(videos) == 5


@pytest.mark.parametrize("what", ["video file", "frame folder"])
def test_a_one_video_input_named_with_bytes_that_are_no_utf8(what: str, tmp_path: Path):
    """`--dataset clip\\xff.mp4` or `--dataset take\\xff/`: the name would name the video in every
    output, which holds text: exit 2 saying so (before: a traceback)."""
    if what == "video file":
        given = clip(odd(tmp_path, b"clip\xff.mp4"), 0)
    else:
        given = odd(tmp_path, b"take\xff")
        shutil.copytree(PHX_FRAMES / "train" / "signer_demo-1", given)
    proc = plan(["--dataset", given, "--out", tmp_path / "out"], code=2)
    kind = "file" if what == "video file" else "folder"
    assert f"the {kind}'s name is not UTF-8" in proc.stderr and "\\udcff" in proc.stderr, proc.stderr


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz", ".zip"])
def test_an_archive_named_with_bytes_that_are_no_utf8(suffix: str, tmp_path: Path,
                                                      wholebody_options: list[str]):
    """`c\\xff.tar` (and .tar.gz, .zip) holding a PHOENIX tree: every frame extracted, the rows
    naming the archive as run.json escapes it (before: the worker died three times and the message
    said to check the disk; a .tar.gz: "download it again?")."""
    tree = phoenix_t(tmp_path / "src")
    archive = pack(tree, odd(tmp_path, b"c\xff" + suffix.encode()), "PHOENIX-2014-T")
    out = tmp_path / "out"
    proc = run_cli(["run", "--dataset", archive, "--out", out, "--workers-per-gpu", "1",
                    *wholebody_options])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    rows = keypoints(out)
    assert len(rows) == 6 and {r["status"] for r in rows} == {"ok"}, rows
    assert rows[0]["image"].endswith(f"#archive=c\\udcff{suffix}"), rows[0]["image"]


def test_a_dataset_argument_under_a_folder_that_is_no_utf8(tmp_path: Path,
                                                           wholebody_options: list[str]):
    """A folder of frame folders, a folder of videos and a .tar.gz lying in `\\xff/`, typed
    relative from there: read as any other (before: the .tar.gz was refused, "download it again?",
    as its path reached rapidgzip, which takes UTF-8 text)."""
    home = odd(tmp_path, b"\xff")
    frame_folders(home)
    clip(home / "vids" / "train" / "a.mp4", 0)
    pack(phoenix_t(tmp_path / "src"), home / "c.tar.gz", "PHOENIX-2014-T")
    for given, n in (("my frames", 5), ("vids", 4), ("c.tar.gz", 6)):
        out = tmp_path / f"out-{given}"
        proc = run_cli(["run", "--dataset", given, "--out", out, "--workers-per-gpu", "1",
                        *wholebody_options], cwd=home)
        assert_no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
        assert len(keypoints(out)) == n


# --- frame numbers: ASCII digits only ----
def test_frame_numbers_are_ascii_digits_only(tmp_path: Path):
    """`1²2.png`, `٣.png` (Arabic-Indic three) and `images0002.png` in one frame folder: `²` and `٣`
    are text, not numbers; planned in natural order of the ASCII digits (before: a traceback,
    str.isdigit() accepts `²` and int() refuses it)."""
    folder = tmp_path / "take"
    folder.mkdir()
    png = sorted((PHX_FRAMES / "train" / "signer_demo-1").glob("images*.png"))[0]
    for name in ("images0002.png", "images0010.png", "1\u00b22.png", "\u0663.png", "1\u00b23.png"):
        shutil.copyfile(png, folder / name)
    out = tmp_path / "out"
    plan(["--dataset", folder, "--out", out])
    files = planned(out)["take"]["files"]
    assert list(files) == ["1\u00b22.png", "1\u00b23.png", "images0002.png", "images0010.png",
                           "\u0663.png"], files


# --- names on disk are literal; a glob only where a manifest asks for one ----
def test_glob_characters_in_names_on_disk_are_literal(tmp_path: Path):
    """A folder of videos holding `clip[1].mp4` and `clip1.mp4`: each video is its own file (before:
    `clip[1]` was planned as the glob matching `clip1.mp4`, read as an image); a folder of frame
    folders holding `take[1]/` and `a*?/`: their frames (before: "no frames")."""
    vids = tmp_path / "vids"
    clip(vids / "clip[1].mp4", 0, frames=3)
    clip(vids / "clip1.mp4", 30, frames=5)
    out = tmp_path / "out"
    plan(["--dataset", vids, "--out", out])
    got = planned(out)
    assert (got["clip[1]"]["num_frames"], got["clip[1]"]["folder"]) == (3, "clip[1].mp4"), got
    assert got["clip[1]"]["source"] == "video" and not got["clip[1]"]["problem"]
    assert got["clip1"]["num_frames"] == 5
    folders = tmp_path / "folders"
    for name, n in (("take[1]", 2), ("a*?", 3), ("take1", 4)):
        (folders / name).mkdir(parents=True)
        for png in sorted((PHX_FRAMES / "train" / "signer_demo-1").glob("images*.png"))[:n]:
            shutil.copyfile(png, folders / name / png.name)
    plan(["--dataset", folders, "--out", tmp_path / "out2"])
    got = planned(tmp_path / "out2")
    assert {v: got[v]["num_frames"] for v in got} == {"take[1]": 2, "a*?": 3, "take1": 4}, got


def test_a_manifest_glob_and_a_manifest_name_that_exists(tmp_path: Path):
    """In a manifest `frames/*.png` is a glob, as documented, but a path whose exact name exists on
    disk is that file or folder (`take[1]`; before: read as the glob `take1`)."""
    listed = tmp_path / "listed"
    for name, n in (("take[1]", 2), ("take1", 4)):
        (listed / name).mkdir(parents=True)
        for png in sorted((PHX_FRAMES / "train" / "signer_demo-1").glob("images*.png"))[:n]:
            shutil.copyfile(png, listed / name / png.name)
    (listed / "list.csv").write_text("name,split,path\nliteral,train,take[1]\n"
                                     "globbed,train,take1/images000[1-3].png\n")
    out = tmp_path / "out"
    plan(["--manifest", listed / "list.csv", "--out", out])
    got = planned(out)
    assert got["literal"]["num_frames"] == 2 and got["literal"]["folder"] == "take[1]", got
    assert got["globbed"]["num_frames"] == 3, got


# --- what is printed: bidi and zero-width characters escaped ----
HIDDEN = "\u202e\u2028\u200b\u2066\u061c\ufeff"


def test_bidi_and_zero_width_characters_in_a_name_are_escaped(tmp_path: Path,
                                                              wholebody_options: list[str]):
    """A stray file named with U+202E (right-to-left override), U+2028 (line separator), U+200B
    (zero width space), U+2066, U+061C and U+FEFF in a frame folder: printed as \\uNNNN (before: as
    they are, so the terminal reversed, broke or hid the name)."""
    folder = tmp_path / "take"
    shutil.copytree(PHX_FRAMES / "train" / "signer_demo-1", folder)
    (folder / f"x{HIDDEN}y.txt").write_bytes(b"x")
    proc = run_cli(["run", "--dataset", folder, "--out", tmp_path / "out", "--workers-per-gpu", "1",
                    *wholebody_options])
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert not any(c in said for c in HIDDEN), ascii(said)
    assert "x\\u202e\\u2028\\u200b\\u2066\\u061c\\ufeffy.txt (not a frame name)" in proc.stderr, \
        proc.stderr


def test_terminal_escapes_what_a_terminal_would_obey_or_hide():
    """The one place printed text is made safe: control, format and separator characters and lone
    surrogates escaped; letters of any script, blanks, newline and tab kept."""
    assert terminal("a\x1b[2Jb\rc\x85") == "a\\x1b[2Jb\\x0dc\\x85"
    assert terminal(f"n{HIDDEN}m") == "n\\u202e\\u2028\\u200b\\u2066\\u061c\\ufeffm"
    assert terminal("\udcff\U000e0001") == "\\udcff\\U000e0001"
    kept = "München 你好\u3000שלום\n\tok"
    assert terminal(kept) == kept


# --- manifest values as written ----
def test_manifest_values_are_read_as_written(tmp_path: Path):
    """A file named ` a.mp4` (leading blank) and one named `c\\d.mp4` are the rows' files (before:
    the blank stripped and `\\` turned into `/`, so the row named other files or none); a Windows
    path `media\\b.mp4` whose file is `media/b.mp4` is not guessed at: its problem says what to
    write; a name with a blank around it is refused, saying so."""
    listed = tmp_path / "listed"
    clip(listed / " a.mp4", 0, frames=3)
    clip(listed / "a.mp4", 30, frames=5)
    clip(listed / "c\\d.mp4", 0, frames=2)
    clip(listed / "c" / "d.mp4", 30, frames=5)
    clip(listed / "media" / "b.mp4", 0, frames=4)
    (listed / "list.csv").write_text("name,split,path\nblank,train, a.mp4\nback,train,c\\d.mp4\n"
                                     "win,train,media\\b.mp4\n")
    out = tmp_path / "out"
    plan(["--manifest", listed / "list.csv", "--out", out])
    got = planned(out)
    assert got["blank"]["num_frames"] == 3 and got["back"]["num_frames"] == 2, got
    assert got["win"]["num_frames"] == 0
    assert "'media/b.mp4' exists: a manifest's paths are read as written" in got["win"]["problem"]
    first = pq.read_table(out / "plan.parquet").to_pylist()
    assert {r["video"] for r in first} == {"blank", "back", "win"}
    (listed / "list.csv").write_text("name,split,path\nblank ,train,a.mp4\n")
    proc = plan(["--manifest", listed / "list.csv", "--out", tmp_path / "out2"], code=2)
    assert "list.csv:2: name 'blank ' begins or ends with a blank" in proc.stderr, proc.stderr
    assert sha256(listed / " a.mp4") != sha256(listed / "a.mp4")


def test_point_numbers_are_ascii_digits_too(tmp_path: Path):
    """`--points face:1²` and `--points ٣`: refused, saying what an item may be (before: a
    traceback for `1²`, which str.isdigit() accepts and int() refuses; `٣` was read as 3). The
    points are read in the run's own numbering, so the run is one whose family has tensor presets
    (the default family, on three frames)."""
    folder = tmp_path / "take"
    folder.mkdir()
    for frame in sorted((PHX_FRAMES / "train" / "signer_demo-1").iterdir())[:3]:
        shutil.copy(frame, folder / frame.name)
    out = tmp_path / "out"
    assert run_cli(["run", "--dataset", folder, "--out", out, "--workers-per-gpu", "1"]).returncode == 0
    for item, said in (("face:1\u00b2", "'1\u00b2' is not N or N-M"),
                       ("\u0663", "use N, N-M, PART or PART:N-M")):
        proc = run_cli(["tensors", "--out", out, "--points", item])
        assert_no_traceback(proc)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
