"""A fuzzer of names (issue 37): random bytes as a name in every position of every input kind.

Beside the Hypothesis property of issue 30 (tests/test_names_property.py, names inside folders,
planning only, in this process), this one runs the real command line, `phoenix-keypoints run` with
the whole-body estimator on tests/tiny_onnx.py's tiny models, in a subprocess, on a corpus where
one name is made of random bytes and pieces that mean something to a shell, a glob, a terminal,
a decoder or a path (ESC, CR, U+202E, U+2028, U+200B, `[`, `*`, `..`, `http:`, `²`, bytes that
are no UTF-8). Positions: the dataset argument itself, a folder above it, a subfolder, a video, a
frame, an archive member, the archive's file name, a corpus csv field, the model path. Input
kinds: a frame folder, a folder of frame folders, a PHOENIX tree, one video, a folder of videos, a
manifest, a .tar, a .tar.gz, a .zip.

Each example asserts: exit 0, 1 or 2 (the ones its position allows), no traceback and no worker
death, nothing opened or listed outside the dataset, the run folder and the models (an audit hook
that `sitecustomize` installs in the command and in every worker it spawns), no raw control,
format (bidi, zero-width) or separator character and no byte that is no UTF-8 on stdout or
stderr, and the good frames unaffected: each frame of the reference run (the same files without
the odd name) found again with the same keypoints.

`tests/test_name_fuzz.py` runs a seeded slice; `scripts/fuzz_names.py` runs many and writes a
JSON summary (docs/results/).
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from helpers import PHX_FRAMES, cli_env
from kinds import clip

KINDS = ("frame-folder", "frame-folders", "phoenix", "one-video", "videos", "manifest", "tar",
         "tar.gz", "zip")
# where a name may sit, per kind (a kind without subfolders or members has no such position)
POSITIONS: dict[str, tuple[str, ...]] = {
    "frame-folder": ("dataset", "folder", "subfolder", "frame", "model"),
    "frame-folders": ("dataset", "folder", "subfolder", "frame", "model"),
    "phoenix": ("dataset", "folder", "subfolder", "frame", "csv", "model"),
    "one-video": ("dataset", "folder", "model"),
    "videos": ("dataset", "folder", "subfolder", "video", "model"),
    "manifest": ("dataset", "folder", "video", "csv", "model"),
    "tar": ("archive", "folder", "member", "subfolder", "model"),
    "tar.gz": ("archive", "folder", "member", "subfolder", "model"),
    "zip": ("archive", "folder", "member", "subfolder", "model"),
}
PAIRS = tuple((k, p) for k in KINDS for p in POSITIONS[k])

# pieces that mean something to somebody; random bytes fill the rest
PIECES = [b"\x1b[2J", b"\x1b]0;x\x07", b"\r", b"\n", b"\t", b"\x7f", b"\xff", b"\xc3", b"\xc2\x85",
          "\u202e".encode(), "\u2028".encode(), "\u200b".encode(), "\u2066".encode(),
          "\ufeff".encode(), "\u00b2".encode(), "\u0663".encode(), "ü".encode(), "u\u0308".encode(),
          b"[", b"]", b"*", b"?", b"{a,b}", b":", b",", b"|", b"%", b"#", b"=", b"-", b" ", b".",
          b"..", b"\\", b"'", b'"', b"$(id)", b"`", b"~", b"http:", b"subfile,,:", b"1", b"images0"]
FRAMES = sorted((PHX_FRAMES / "train" / "signer_demo-1").glob("images*.png"))[:3]
SUFFIX = {"tar": ".tar", "tar.gz": ".tar.gz", "zip": ".zip"}


def random_name(rng: random.Random) -> bytes:
    """A file name (no '/', no NUL, not '.' or '..', at most 120 bytes) of pieces and bytes."""
    while True:
        parts = [rng.choice(PIECES) if rng.random() < 0.6 else
                 bytes(rng.choice([b for b in range(1, 256) if b != 0x2F])
                       for _ in range(rng.randint(1, 3)))
                 for _ in range(rng.randint(1, 5))]
        name = b"".join(parts)[:120]
        if name not in (b".", b".."):
            return name


def under(folder: Path, name: bytes) -> Path:
    return Path(os.fsdecode(os.fsencode(folder) + b"/" + name))


def is_utf8(name: bytes) -> bool:
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- the good data: the same bytes in every example, so their keypoints are comparable ---------------
@dataclass
class Material:
    """What every example is built from: frame files, a clip and the tiny models."""

    folder: Path
    clip: Path = field(init=False)
    models: dict[str, Path] = field(init=False)

    def __post_init__(self) -> None:
        from tiny_onnx import tiny_models

        self.clip = self.folder / "clip.mp4"
        if not self.clip.is_file():
            clip(self.clip, 0, frames=3)
        self.models = tiny_models(self.folder / "models")

    def frames(self, dest: Path, n: int = 2) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        for png in FRAMES[:n]:
            shutil.copyfile(png, dest / png.name)
        return dest

    def video(self, dest: Path) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.clip, dest)
        return dest


@dataclass
class Example:
    """One corpus built with an odd name: how to run it and what it may answer."""

    kind: str
    position: str
    name: bytes
    folder: Path  # everything of the example lies here; nothing outside `allowed` may be opened
    args: list[str] = field(default_factory=list)
    cwd: Path | None = None
    allowed: list[Path] = field(default_factory=list)
    codes: tuple[int, ...] = (0,)  # the exits the position allows
    keep_good: bool = True  # whether exit 0 must still give every good frame
    good: set[tuple[str, str]] = field(default_factory=set)  # (file sha256, frame in file)

    @property
    def out(self) -> Path:
        return self.folder / "out"


def _phoenix(m: Material, root: Path, csv_field: bytes | None = None) -> Path:
    """A PHOENIX-2014-T tree of one train video (2 frames): annotations and frames."""
    manual = root / "annotations" / "manual"
    manual.mkdir(parents=True)
    text = b"translation" if csv_field is None else csv_field
    head = b"name|video|start|end|speaker|orth|translation\n"
    (manual / "PHOENIX-2014-T.train.corpus.csv").write_bytes(
        head + b"signer_demo-1|signer_demo-1/1/*.png|-1|-1|Signer01|GLOSS|" + text + b"\n")
    for split in ("dev", "test"):
        (manual / f"PHOENIX-2014-T.{split}.corpus.csv").write_bytes(head)
    m.frames(root / "features" / "fullFrame-210x260px" / "train" / "signer_demo-1")
    return root


def _manifest(m: Material, folder: Path, name: bytes, position: str) -> Path:
    """A manifest listing the clip and a frame folder, with an odd row or file name."""
    m.video(folder / "clip.mp4")
    m.frames(folder / "frames")
    rows = [b"name,split,path,text", b"clip,train,clip.mp4,a", b"frames,dev,frames,b"]
    if position == "video":
        (under(folder, name)).write_bytes(b"junk")
        rows.append(b"odd,test,\"" + name.replace(b'"', b'""') + b"\",c")
    elif position == "csv":
        cells = [b"odd", b"test", b"clip.mp4", b"c"]
        cells[random.Random(name).randrange(4)] = name
        rows.append(b",".join(b'"' + c.replace(b'"', b'""') + b'"' for c in cells))
    listed = under(folder, name + b".csv") if position == "dataset" else folder / "list.csv"
    listed.write_bytes(b"\n".join(rows) + b"\n")
    return listed


def _pack(tree: Path, dest: Path, kind: str, extra: list[tuple[bytes, bytes]]) -> Path:
    """tree's files (and `extra` (name, bytes) members, names of any bytes) in a tar, tar.gz or zip,
    under PHOENIX-2014-T/."""
    members = [(b"PHOENIX-2014-T/" + os.fsencode(p.relative_to(tree).as_posix()), p.read_bytes())
               for p in sorted(tree.rglob("*")) if p.is_file()] + extra
    if kind == "zip":  # zipfile writes text names: a placeholder of the same length, then the bytes
        marks = {n: f"@{k:05d}".ljust(len(n), "@").encode() for k, (n, _) in enumerate(members)}
        with zipfile.ZipFile(dest, "w") as z:
            for n, data in members:
                z.writestr(marks[n].decode(), data)
        raw = dest.read_bytes()
        for n, mark in marks.items():
            raw = raw.replace(mark, n)
        dest.write_bytes(raw)
        return dest
    with tarfile.open(dest, "w:gz" if kind == "tar.gz" else "w", format=tarfile.PAX_FORMAT,
                      encoding="utf-8", errors="surrogateescape") as t:
        for n, data in members:
            info = tarfile.TarInfo(os.fsdecode(n))
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return dest


def _keys_of_frames(ex: Example, n: int) -> None:
    ex.good.update((_sha(p), "") for p in FRAMES[:n])


def _keys_of_clip(ex: Example, m: Material) -> None:
    ex.good.update((_sha(m.clip), str(i)) for i in range(3))


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _junk(path: Path, data: bytes = b"junk") -> None:
    if not os.path.lexists(path):  # never over a good file that a name happens to equal
        path.write_bytes(data)


def _folder_kinds(m: Material, ex: Example, ds: Path) -> Path:
    """frame-folder, frame-folders, phoenix: the dataset at ds, the odd name where asked."""
    name, pos = ex.name, ex.position
    if ex.kind == "phoenix":
        _phoenix(m, ds, name if pos == "csv" else None)
        inner = ds / "features" / "fullFrame-210x260px" / "train"
        frames = inner / "signer_demo-1"
        _keys_of_frames(ex, 2)
    elif ex.kind == "frame-folders":
        inner, frames = ds, m.frames(ds / "a")
        m.frames(ds / "b", 1)
        _keys_of_frames(ex, 2)
    else:
        inner = frames = m.frames(ds, 3)
        _keys_of_frames(ex, 3)
    if pos == "subfolder":
        odd = under(inner, name)
        odd.mkdir(exist_ok=True)
        m.frames(odd, 1) if ex.kind == "frame-folders" else _junk(odd / "images0001.png")
    elif pos == "frame":
        _junk(under(frames, name))
    return ds


def _video_kinds(m: Material, ex: Example, home: Path, dsname: bytes) -> Path:
    """one-video, videos, manifest."""
    name, pos = ex.name, ex.position
    _keys_of_clip(ex, m)
    if ex.kind == "one-video":
        return m.video(under(home, dsname + b".mp4" if pos == "dataset" else b"clip.mp4"))
    if ex.kind == "manifest":
        home.mkdir(parents=True, exist_ok=True)
        _keys_of_frames(ex, 2)
        return _manifest(m, home, name, pos)
    ds = under(home, dsname)
    m.video(ds / "train" / "clip.mp4")
    if pos == "subfolder":
        under(ds, name).mkdir()
        _junk(under(ds, name) / "odd.mp4")
    elif pos == "video":
        (ds / "test").mkdir()
        _junk(under(ds / "test", name + b".mp4"))
    return ds


def _archive_kinds(m: Material, ex: Example, home: Path) -> Path:
    tree = _phoenix(m, ex.folder / "tree")
    _keys_of_frames(ex, 2)
    train = b"PHOENIX-2014-T/features/fullFrame-210x260px/train/"
    extra = {"member": [(train + b"signer_demo-1/" + ex.name, b"junk")],
             "subfolder": [(train + ex.name + b"/images0001.png", b"junk")]}.get(ex.position, [])
    stem = ex.name if ex.position == "archive" else b"corpus"
    home.mkdir(parents=True, exist_ok=True)
    return _pack(tree, under(home, stem + SUFFIX[ex.kind].encode()), ex.kind, extra)


def build(m: Material, kind: str, position: str, name: bytes, folder: Path) -> Example:
    """The example's corpus on disk and the command that runs it."""
    ex = Example(kind, position, name, folder)
    folder.mkdir(parents=True)
    home = under(folder, name) if position == "folder" else folder / "home"
    dsname = name if position == "dataset" else {"phoenix": b"PHOENIX-2014-T"}.get(kind, b"ds")
    if kind in ("frame-folder", "frame-folders", "phoenix"):
        given = _folder_kinds(m, ex, under(home, dsname))
    elif kind in ("one-video", "videos", "manifest"):
        given = _video_kinds(m, ex, home, dsname)
    else:
        given = _archive_kinds(m, ex, home)
    one = kind in ("one-video", "frame-folder", "manifest")  # read from the folder it lies in
    ex.allowed = [given.parent if one else given, ex.out]
    ex.args = ["--manifest" if kind == "manifest" else "--dataset",
               f"./{given.name}" if random.Random(name).random() < 0.5 else str(given)]
    ex.cwd = given.parent
    models = dict(m.models)
    if position == "model":
        mine = folder / "models"
        mine.mkdir()
        models["pose"] = Path(shutil.copyfile(m.models["pose"], under(mine, name + b".onnx")))
        ex.allowed.append(mine)
    ex.allowed.append(m.folder / "models")
    ex.args += ["--estimator", "wholebody", "--detector", str(models["detector"]),
                "--pose-model", str(models["pose"])]
    _expect(ex)
    return ex


def _expect(ex: Example) -> None:
    """Which exits the position allows: a name that cannot be held is refused (2) only where it
    would name the video (a one-video input) or where a library takes it as text (a model path);
    a corpus file's field may make the file unreadable (2); anywhere else the run goes on (0)."""
    names_the_video = ex.position == "dataset" and ex.kind in ("one-video", "frame-folder")
    in_a_text_file = ex.kind == "manifest" and ex.position == "video"  # a manifest is UTF-8
    if ex.position == "csv":
        ex.codes = (0, 2)
    elif (ex.position == "model" or names_the_video or in_a_text_file) and not is_utf8(ex.name):
        ex.codes, ex.keep_good = (2,), False


# --- running one example and judging what it did ----------------------------------------------------
HOOK = '''"""Installed by tests/name_fuzz.py in every Python process of a fuzzed run: an audit hook that
logs each open or listing below the example's folder that is outside the paths it allows."""
import json, os, sys

_conf = os.environ.get("NAME_FUZZ_AUDIT")
if _conf:
    with open(_conf, encoding="utf-8") as _f:
        _c = json.load(_f)
    _base, _allowed = _c["base"] + "/", tuple(a + "/" for a in _c["allowed"])
    _log = os.open(_c["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _hook(event, args):
        if event not in ("open", "os.scandir", "os.listdir", "glob.glob") or not args:
            return
        path = os.fsdecode(args[0]) if isinstance(args[0], bytes) else args[0]
        if not isinstance(path, str):
            return
        for seen in {os.path.abspath(path), os.path.realpath(path)}:
            if (seen + "/").startswith(_base) and not (seen + "/").startswith(_allowed):
                os.write(_log, f"{event} {seen}\\n".encode("utf-8", "surrogateescape"))

    sys.addaudithook(_hook)
'''
HIDDEN = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Cn"))
# the command as a user runs it, from the dataset's folder: the installed script, whose sys.path
# holds no current folder (`python -m` would put it first, and list it at every import)
_SCRIPT = Path(sys.executable).with_name("phoenix-keypoints")
ENTRY = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-P", "-m", "phoenix_keypoints"]
BAR = re.compile(r"\r(?=frames: )")  # the progress bar's own carriage returns


@dataclass
class Outcome:
    code: int
    said: str  # stdout and stderr, bytes that are no UTF-8 as surrogates
    strays: list[str]
    rows: list[dict]


def run(m: Material, ex: Example, timeout: float = 120) -> Outcome:
    """The real command line on the example, every process of it watched by the audit hook."""
    hook = m.folder / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    conf, log = ex.folder / "audit.json", ex.folder / "audit.log"
    conf.write_text(json.dumps({"base": str(ex.folder), "allowed": [str(a) for a in ex.allowed],
                                "log": str(log)}))
    env = cli_env({"NAME_FUZZ_AUDIT": str(conf), "TQDM_DISABLE": "1"})
    # no empty entry (cli_env leaves one when PYTHONPATH was unset): it is the current folder
    paths = [str(hook), *env["PYTHONPATH"].split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    cmd = [*ENTRY, "run", *ex.args, "--out", str(ex.out), "--workers-per-gpu", "1"]
    proc = subprocess.run(cmd, env=env, cwd=ex.cwd, capture_output=True, timeout=timeout)
    said = (proc.stdout + proc.stderr).decode("utf-8", "surrogateescape")
    strays = log.read_text("utf-8", "surrogateescape").splitlines() if log.exists() else []
    rows = []
    if (ex.out / "keypoints.parquet").is_file():
        rows = pq.read_table(ex.out / "keypoints.parquet", columns=[
            "image", "status", "file_sha256", "wholebody", "persons"]).to_pylist()
    return Outcome(proc.returncode, said, strays, rows)


def key(row: dict) -> tuple[str, str]:
    """A frame by the bytes it came from: the file's sha256, and its index inside a video file."""
    from phoenix_keypoints.extract.sources.base import parse_image

    ref = parse_image(row["image"])
    return (row["file_sha256"] or "", ref.detail if ref.fragment == "frame" else "")


def raw_characters(said: str) -> list[str]:
    """Characters a terminal would obey or hide, or bytes that are no UTF-8, printed as they are."""
    return sorted({f"U+{ord(c):04X}" for c in BAR.sub("", said)
                   if c not in "\n\t" and unicodedata.category(c) in HIDDEN})


def problems(ex: Example, got: Outcome, reference: dict[tuple[str, str], tuple]) -> list[str]:
    """What the example did wrong, [] when nothing: the fuzzer's assertions."""
    found = []
    if got.code not in (0, 1, 2) or got.code not in ex.codes:
        found.append(f"exit {got.code}, expected one of {ex.codes}")
    if "Traceback" in got.said or "died (exit status" in got.said:
        found.append("a traceback or a worker's death")
    if got.strays:
        found.append(f"opened outside the dataset: {got.strays[:3]}")
    if bad := raw_characters(got.said):
        found.append(f"printed raw: {' '.join(bad[:8])}")
    if got.code == 0 and ex.keep_good:
        seen = {key(r) for r in got.rows}
        if lost := ex.good - seen:
            found.append(f"{len(lost)} good frame(s) missing")
        changed = [key(r) for r in got.rows if key(r) in reference
                   and (json.dumps(r["wholebody"]), r["persons"]) != reference[key(r)]]
        if changed:
            found.append(f"{len(changed)} good frame(s) with other keypoints")
    return found


def reference_run(m: Material) -> dict[tuple[str, str], tuple]:
    """The good frames' keypoints from a clean run: a manifest of the clip and the frames."""
    folder = m.folder / "reference"
    if folder.exists():
        shutil.rmtree(folder)
    ex = Example("manifest", "none", b"", folder)
    folder.mkdir(parents=True)
    m.video(folder / "clip.mp4")
    m.frames(folder / "frames", 3)
    (folder / "list.csv").write_text("name,split,path\nclip,train,clip.mp4\nframes,dev,frames\n")
    ex.args = ["--manifest", str(folder / "list.csv"), "--estimator", "wholebody", "--detector",
               str(m.models["detector"]), "--pose-model", str(m.models["pose"])]
    ex.allowed = [folder]
    got = run(m, ex)
    assert got.code == 0 and len(got.rows) == 6, got.said
    return {key(r): (json.dumps(r["wholebody"]), r["persons"]) for r in got.rows}


def fuzz_one(m: Material, reference: dict, kind: str, position: str, seed: int,
             folder: Path) -> dict:
    """One example from a seed: its name, what it did and what was wrong (JSON-ready)."""
    name = random_name(random.Random(f"{kind}/{position}/{seed}"))
    ex = build(m, kind, position, name, folder)
    got = run(m, ex)
    wrong = problems(ex, got, reference)
    return {"kind": kind, "position": position, "seed": seed, "name": name.hex(),
            "shown": name.decode("utf-8", "backslashreplace"), "exit": got.code,
            "rows": len(got.rows), "problems": wrong,
            "said": got.said[-600:] if wrong else ""}
