"""Every kind of input the tool reads, built tiny from the shared data: two short videos a kind.

KINDS covers every corpus in extract.corpora.CORPORA and every frame source in
extract.sources.SOURCES (tests/test_promises.py refuses a registry entry that no kind here builds),
so a corpus or source added later gets the promises of tests/test_promises.py by adding its kind.
A builder writes its input under a folder and returns the command-line words that name it.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from helpers import PHX_FRAMES, SHARED_SAMPLE, VIDEOS, build_2014_layout, build_csl

# (split, video, frames taken) of the tiny PHOENIX-2014-T tree
PHOENIX_PICKS = (("train", "signer_demo-1", 4), ("dev", "25October_2010_Monday_tagesschau-17", 2))
CLIP_FRAMES = 4


def phoenix_t(dest: Path) -> Path:
    """PHOENIX-2014-T's layout with two videos of the shared sample (4 and 2 real frames)."""
    root = dest / "PHOENIX-2014-T"
    manual = root / "annotations" / "manual"
    manual.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        lines = (SHARED_SAMPLE / "annotations" / "manual" /
                 f"PHOENIX-2014-T.{split}.corpus.csv").read_text(encoding="utf-8").splitlines()
        keep = {name for s, name, _ in PHOENIX_PICKS if s == split}
        rows = [lines[0], *(line for line in lines[1:] if line.split("|")[0] in keep)]
        (manual / f"PHOENIX-2014-T.{split}.corpus.csv").write_text("\n".join(rows) + "\n")
    for split, name, n in PHOENIX_PICKS:
        folder = root / "features" / "fullFrame-210x260px" / split / name
        folder.mkdir(parents=True)
        for png in sorted((PHX_FRAMES / split / name).glob("images*.png"))[:n]:
            shutil.copyfile(png, folder / png.name)
    return root


def clip(dest: Path, first: int, frames: int = CLIP_FRAMES, rate: Fraction = Fraction(25)) -> Path:
    """A short mp4 (MPEG-4 part 2) of signer_demo.mp4's frames first..first+frames-1, halved,
    at `rate` frames a second."""
    import av

    dest.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(VIDEOS / "signer_demo.mp4")) as src:
        rgbs = [f.to_ndarray(format="rgb24")[::2, ::2] for i, f in enumerate(src.decode(video=0))
                if first <= i < first + frames]
    with av.open(str(dest), "w") as out:
        s = out.add_stream("mpeg4", rate=rate)
        s.height, s.width = rgbs[0].shape[:2]
        s.pix_fmt = "yuv420p"
        for rgb in rgbs:
            for packet in s.encode(av.VideoFrame.from_ndarray(rgb.copy(), format="rgb24")):
                out.mux(packet)
        for packet in s.encode(None):
            out.mux(packet)
    return dest


def videos(dest: Path) -> Path:
    root = dest / "clips"
    clip(root / "train" / "signer_a.mp4", 0)
    clip(root / "test" / "signer_b.mp4", 30)
    return root


def how2sign(dest: Path) -> Path:
    root = dest / "How2Sign"
    header = "\t".join(["VIDEO_ID", "VIDEO_NAME", "SENTENCE_ID", "SENTENCE_NAME", "START_REALIGNED",
                        "END_REALIGNED", "SENTENCE"])
    for split, name, first in (("train", "-fZc293MpJk_0-1-rgb_front", 0),
                               ("val", "-d5dN54tH2E_1-1-rgb_front", 30)):
        clip(root / "sentence_level" / split / "rgb_front" / "raw_videos" / f"{name}.mp4", first)
        vid = name.split("_")[0]
        (root / f"how2sign_realigned_{split}.csv").write_text(
            f"{header}\n{vid}\t{vid}-1-rgb_front\t{vid}_0\t{name}\t1.5\t3.2\tHi, {split}.\n")
    return root


def manifest(dest: Path) -> Path:
    """A manifest listing a video file and a folder of PNG frames (both sources)."""
    root = dest / "listed"
    clip(root / "media" / "a.mp4", 0)
    frames = root / "media" / "b_frames"
    frames.mkdir(parents=True)
    for png in sorted((PHX_FRAMES / "train" / "signer_demo-1").glob("images*.png"))[:3]:
        shutil.copyfile(png, frames / png.name)
    path = root / "list.csv"
    path.write_text("name,split,path,text\nclip_a,train,media/a.mp4,hello\n"
                    "frames_b,test,media/b_frames,world\n")
    return path


def frame_folders(dest: Path) -> Path:
    """A folder of frame folders, one video each (extract/corpora/clips.py), 3 and 2 real frames."""
    root = dest / "my frames"
    for (split, name, _), n in zip(PHOENIX_PICKS, (3, 2), strict=True):
        (root / name).mkdir(parents=True)
        for png in sorted((PHX_FRAMES / split / name).glob("images*.png"))[:n]:
            shutil.copyfile(png, root / name / png.name)
    return root


ONE_VIDEO_FRAMES = 10  # a one-video kind's single chunk lasts long enough to be killed inside


def one_clip(dest: Path) -> Path:
    """`--dataset clip.mp4`: one video file, beside another the run must leave alone."""
    clip(dest / "clips" / "other.mp4", 30)
    return clip(dest / "clips" / "signer one.mp4", 0, ONE_VIDEO_FRAMES)


def one_frame_folder(dest: Path) -> Path:
    """`--dataset FOLDER`: one folder of PNG frames, beside a sibling the run must leave alone."""
    root = frame_folders(dest)
    folder = root / "signer one"
    folder.mkdir()
    for png in sorted((PHX_FRAMES / "train" / "signer_demo-1").glob("images*.png"))[:ONE_VIDEO_FRAMES]:
        shutil.copyfile(png, folder / png.name)
    return folder


def csl(dest: Path) -> Path:
    return build_csl(dest / "CSL-Daily", frames=3)


def phoenix_2014(dest: Path) -> Path:
    t_root = phoenix_t(dest / "t")
    return build_2014_layout(t_root, dest / "phoenix-2014-multisigner")


# --- archives ------------------------------------------------------------------------------------
def pack(tree: Path, dest: Path, prefix: str) -> Path:
    """tree's files in an archive whose format dest's suffix names, under the folders `prefix`
    ("" = at the archive's root), with folder members as `tar` and `zip -r` write them."""
    names = [(p, "/".join(filter(None, (prefix, p.relative_to(tree).as_posix()))))
             for p in sorted(tree.rglob("*"))]
    if dest.name.endswith(".zip"):
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as zf:
            for p, name in names:
                zf.write(p, name)
        return dest
    with tarfile.open(dest, "w:gz" if dest.name.endswith(".gz") else "w") as tf:
        for p, name in names:
            tf.add(p, name, recursive=False)
    return dest


PLACES = {"root": "", "top": "PHOENIX-2014-T", "release": "PHOENIX-2014-T-release-v3/PHOENIX-2014-T"}


def archived(place: str, suffix: str) -> Callable[[Path], Path]:
    def build(dest: Path) -> Path:
        tree = phoenix_t(dest / "tree")
        out = pack(tree, dest / f"PHOENIX-2014-T{suffix}", PLACES[place])
        shutil.rmtree(tree)
        return out
    return build


def packed(build: Callable[[Path], Path], name: str) -> Callable[[Path], Path]:
    """A corpus built by `build`, packed under its own top folder as `zip -r` or `tar` packs it."""
    def build_packed(dest: Path) -> Path:
        tree = build(dest / "tree")
        out = pack(tree, dest / name, tree.name)
        shutil.rmtree(dest / "tree")
        return out
    return build_packed


@dataclass(frozen=True)
class Kind:
    id: str
    corpus: str  # its reader's name in CORPORA
    sources: tuple[str, ...]  # the frame sources its rows come from
    build: Callable[[Path], Path]  # writes the input under a folder; returns what names it
    flag: str = "--dataset"
    one_video: bool = False  # one video, one chunk: the kill of the promises lands inside it


KINDS: tuple[Kind, ...] = (
    Kind("phoenix-T", "phoenix", ("folder",), lambda d: phoenix_t(d)),
    Kind("phoenix-2014", "phoenix", ("folder",), phoenix_2014),
    *(Kind(f"archive-{place}{suffix}", "phoenix", ("archive",), archived(place, suffix))
      for place in PLACES for suffix in (".tar.gz", ".tar", ".zip")),
    Kind("videos", "videos", ("video",), videos),
    Kind("videos-archive", "videos", ("video",), packed(videos, "clips.tar.gz")),
    Kind("manifest", "manifest", ("video", "folder"), manifest, "--manifest"),
    Kind("how2sign", "how2sign", ("video",), how2sign),
    Kind("how2sign-archive", "how2sign", ("video",), packed(how2sign, "How2Sign.tar")),
    Kind("frame-folders", "clips", ("folder",), frame_folders),
    Kind("one-clip", "clips", ("video",), one_clip, one_video=True),
    Kind("one-frame-folder", "clips", ("folder",), one_frame_folder, one_video=True),
    Kind("csl-daily", "csl-daily", ("folder",), csl),
    Kind("csl-daily-archive", "csl-daily", ("archive",), packed(csl, "CSL-Daily.zip")),
)
