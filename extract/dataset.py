"""Find the videos of a PHOENIX tree: corpus csv files, their splits, and each video's frame files.

Two releases are understood and told apart by their corpus files:
- PHOENIX-2014-T: `annotations/manual/PHOENIX-2014-T.<split>.corpus.csv`,
  header `name|video|start|end|speaker|orth|translation`; the csv says `<name>/1/*.png` but frames
  lie in `features/fullFrame-210x260px/<split>/<name>/images0001.png` (no `1/`).
- PHOENIX-2014: `annotations/manual/<split>.corpus.csv`, header `id|folder|signer|annotation`;
  frames really are in `features/fullFrame-210x260px/<split>/<id>/1/<rec>.avi_pid0_fn000000-0.png`.

Everything the csv says is checked before it is trusted: a bad file is refused with its path, line
and what to do, never half-read. A listed video with no folder or no frames is kept, with its
problem, so that plan, status and the end of a run can report it.

A video's frames are the names the release gives them (FRAME_NAMES), whatever is behind the name:
a dangling link or a directory named like a frame is still a frame, and its row will say why it
could not be read, so frame numbers never shift. Anything else in the folder (hidden files such as
macOS's `._images0001.png`, `notes.txt`, `images0001.png.bak`, subfolders) is no frame: it is kept
in Video.ignored with the reason, to be reported, and never numbered.

Names are compared in Unicode NFC. The csv and the folders can disagree in normalisation without
anyone having meant a different video: macOS file systems and some zip and rsync paths store names
decomposed (NFD) while the csv is composed (NFC), and the two print identically. Canonically
equivalent strings are the same text by Unicode's definition, so matching them cannot pick a video
the csv did not mean; the folder's own spelling is kept for every path that is opened. Only when
two folders on disk are the same name in NFC is the match refused, as that (the video's problem
names both), because then no choice is safe. Two csv names equal in NFC are the same video listed
twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

SPLITS: tuple[str, ...] = ("train", "dev", "test")
FRAMES_DIR = "features/fullFrame-210x260px"

LAYOUT_T = "phoenix-2014-T"
LAYOUT_2014 = "phoenix-2014"

# layout -> (csv name pattern, required columns, (name col, folder col, speaker, gloss, translation))
_LAYOUTS: dict[str, tuple[str, tuple[str, ...], tuple[str, str, str, str, str | None]]] = {
    LAYOUT_T: (
        "PHOENIX-2014-T.{split}.corpus.csv",
        ("name", "video", "start", "end", "speaker", "orth", "translation"),
        ("name", "video", "speaker", "orth", "translation"),
    ),
    LAYOUT_2014: (
        "{split}.corpus.csv",
        ("id", "folder", "signer", "annotation"),
        ("id", "folder", "signer", "annotation", None),
    ),
}


class DatasetError(Exception):
    """The dataset cannot be used as given; the message says what, where and what to do."""


@dataclass(frozen=True)
class Video:
    """One listed video: where its frames are and what the corpus says of it."""

    split: str
    name: str
    folder: str  # relative to the dataset root, posix separators
    files: tuple[str, ...]  # frame file names in folder, in frame order
    speaker: str = ""
    gloss: str = ""
    translation: str = ""
    problem: str = ""  # "" when frames were found, else why the video cannot be processed
    # (name, reason) of each entry of the frame folder that is no frame, in name order
    ignored: tuple[tuple[str, str], ...] = ()

    @property
    def num_frames(self) -> int:
        return len(self.files)


@dataclass
class Dataset:
    root: Path
    layout: str
    videos: list[Video]
    unlisted: list[str] = field(default_factory=list)  # "<split>/<folder>" on disk, in no csv
    corpus_sha256: str = ""

    @property
    def num_frames(self) -> int:
        return sum(v.num_frames for v in self.videos)

    def fingerprint(self) -> str:
        """A digest of everything that decides the output: corpus text and every frame path."""
        h = hashlib.sha256()
        h.update(self.layout.encode())
        h.update(self.corpus_sha256.encode())
        for v in self.videos:
            h.update(f"\0{v.split}\0{v.name}\0{v.folder}\0".encode())
            h.update("\0".join(v.files).encode())
        return h.hexdigest()


def detect_layout(root: Path) -> str:
    """Which release `root` is, from its corpus files; a clear refusal when it is neither."""
    manual = root / "annotations" / "manual"
    for layout, (pattern, _, _) in _LAYOUTS.items():
        if any((manual / pattern.format(split=s)).is_file() for s in SPLITS):
            return layout
    hint = ""
    if root.is_dir():
        inner = [p.name for p in root.iterdir() if (p / "annotations" / "manual").is_dir()]
        if inner:
            hint = f" It has {inner[0]}/ inside: pass --dataset {root / inner[0]}."
    what = "does not exist" if not root.exists() else "is not a PHOENIX-2014-T or PHOENIX-2014 tree"
    raise DatasetError(
        f"--dataset {root} {what}: expected annotations/manual/PHOENIX-2014-T.train.corpus.csv "
        f"(or train.corpus.csv for PHOENIX-2014) and {FRAMES_DIR}/.{hint} Pass the folder that "
        "holds annotations/ and features/."
    )


@dataclass(frozen=True)
class CorpusRow:
    split: str
    name: str
    folder: str  # csv's folder field, relative posix, without the trailing glob
    speaker: str
    gloss: str
    translation: str
    source: str  # "file:line", for messages


def _safe_component(value: str, what: str, where: str) -> str:
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\0" in value:
        raise DatasetError(
            f"{where}: {what} {value!r} is not a plain folder name (no '/', '..' or empty). "
            "Fix or remove that line of the corpus file."
        )
    return value


def _safe_relative(value: str, where: str) -> str:
    p = PurePosixPath(value.replace("\\", "/"))
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value) or ".." in p.parts:
        raise DatasetError(
            f"{where}: video path {value!r} points outside the dataset root (absolute or '..'). "
            "Fix or remove that line of the corpus file."
        )
    return str(p)


def read_corpus(path: Path, split: str, layout: str) -> list[CorpusRow]:
    """Parse one corpus csv, refusing anything that does not have the release's exact shape."""
    _, columns, (c_name, c_folder, c_speaker, c_gloss, c_trans) = _LAYOUTS[layout]
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path}: not UTF-8 ({e}). Save it as UTF-8.") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror}).") from None
    lines = text.splitlines()
    if not lines:
        raise DatasetError(f"{path}:1: empty corpus file; expected the header {'|'.join(columns)}.")
    header = lines[0].lstrip("\ufeff").split("|")
    if len(header) == 1:
        sep = next((s for s in (",", ";", "\t") if s in lines[0]), None)
        said = f"it looks {sep!r}-separated" if sep else "it has one column"
        raise DatasetError(
            f"{path}:1: corpus files are '|'-separated, but {said}. Expected the header "
            f"{'|'.join(columns)}."
        )
    missing = [c for c in columns if c not in header]
    if missing:
        raise DatasetError(
            f"{path}:1: header lacks column(s) {', '.join(missing)}; expected {'|'.join(columns)}."
        )
    col = {c: header.index(c) for c in header}
    rows: list[CorpusRow] = []
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        fields = line.split("|")
        if len(fields) != len(header):
            raise DatasetError(
                f"{where}: {len(fields)} fields where the header has {len(header)} "
                "('|' inside a field, or a broken line). Fix that line."
            )
        name = _safe_component(fields[col[c_name]].strip(), c_name, where)
        folder_field = _safe_relative(fields[col[c_folder]].strip(), where)
        folder = str(PurePosixPath(folder_field).parent) if "*" in folder_field else folder_field
        rows.append(
            CorpusRow(
                split=split,
                name=name,
                folder=folder,
                speaker=fields[col[c_speaker]].strip(),
                gloss=fields[col[c_gloss]].strip(),
                translation=fields[col[c_trans]].strip() if c_trans else "",
                source=where,
            )
        )
    return rows


_DIGITS = re.compile(r"([0-9]+)")

# What the release calls a frame, per layout (whole name, case as shipped): the T release's frames
# are images0001.png...; PHOENIX-2014's are `<rec>.avi_pid0_fn000000-0.png`, but what its csv
# promises is only `<id>/1/*.png`, so any visible .png there is a frame (a stricter pattern that
# missed one real frame would lose it silently).
FRAME_NAMES: dict[str, re.Pattern[str]] = {
    LAYOUT_T: re.compile(r"images[0-9]+\.png"),
    LAYOUT_2014: re.compile(r"[^.].*\.png", re.DOTALL),
}

IGNORED_HIDDEN = "hidden file"
IGNORED_FOLDER = "folder"
IGNORED_NAME = "not a frame name"


def nfc(name: str) -> str:
    """The one normalisation names are compared in (see the module's docstring)."""
    return unicodedata.normalize("NFC", name)


def frame_sort_key(name: str) -> tuple:
    """Natural order: images0002 before images0010; 2014's fn000009-0 before fn000010-0."""
    return tuple(int(t) if t.isdigit() else t for t in _DIGITS.split(name))


def list_frames(
    folder: Path, layout: str = LAYOUT_T
) -> tuple[list[str], list[tuple[str, str]]] | None:
    """(frame names in frame order, [(name, why it is no frame)]); None when there is no folder.

    A name is a frame by its name alone, never by what it points to: a dangling link or a directory
    named like a frame stays in the list, so that its row says why and later frames keep their
    numbers. Hidden names are never frames (`._images0001.png` is macOS metadata, not an image).
    """
    pattern = FRAME_NAMES[layout]
    frames: list[str] = []
    ignored: list[tuple[str, str]] = []
    try:
        with os.scandir(folder) as it:
            for e in it:
                if e.name.startswith("."):
                    ignored.append((e.name, IGNORED_HIDDEN))
                elif pattern.fullmatch(e.name):
                    frames.append(e.name)
                else:
                    ignored.append((e.name, IGNORED_FOLDER if _is_dir(e) else IGNORED_NAME))
    except (FileNotFoundError, NotADirectoryError):
        return None
    frames.sort(key=frame_sort_key)
    ignored.sort()
    return frames, ignored


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


class _NameIndex:
    """Finds a path on disk whose components equal the wanted ones in NFC; one scan per folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dirs: dict[str, dict[str, list[str]]] = {}

    def _entries(self, rel: str) -> dict[str, list[str]]:
        if rel not in self._dirs:
            found: dict[str, list[str]] = {}
            try:
                with os.scandir(self.root / rel) as it:
                    for e in it:
                        found.setdefault(nfc(e.name), []).append(e.name)
            except OSError:
                pass
            self._dirs[rel] = found
        return self._dirs[rel]

    def resolve(self, rel: str) -> tuple[str | None, str]:
        """(the folder as spelt on disk or None, "" or why no folder can be chosen)."""
        cur = PurePosixPath()
        for part in PurePosixPath(rel).parts:
            if (self.root / cur / part).exists():
                cur /= part
                continue
            names = sorted(self._entries(str(cur)).get(nfc(part), []))
            if len(names) > 1:
                shown = " and ".join(repr(n) for n in names)
                return None, f"folders {shown} differ only in Unicode normalisation"
            if not names:
                return None, ""
            cur /= names[0]
        return str(cur), ""


def _frames_folder(root: Path, row: CorpusRow, layout: str) -> str:
    """Where a row's frames are, relative to root: the T release drops the csv's trailing `1/`."""
    base = PurePosixPath(FRAMES_DIR) / row.split
    if layout == LAYOUT_T:
        return str(base / row.name)
    return str(base / row.folder)


def _unlisted(root: Path, splits: Sequence[str], listed_dirs: set[str]) -> list[str]:
    """"<split>/<folder>" of each folder on disk that no selected video's frames are in."""
    unlisted = []
    for split in splits:
        split_dir = root / FRAMES_DIR / split
        if not split_dir.is_dir():
            continue
        with os.scandir(split_dir) as it:
            for e in it:
                rel = f"{FRAMES_DIR}/{split}/{e.name}"
                if e.is_dir() and not {rel, rel + "/1"} & listed_dirs:
                    unlisted.append(f"{split}/{e.name}")
    return unlisted


def _video(root: Path, row: CorpusRow, layout: str, names: _NameIndex) -> Video:
    """A corpus row with its frames listed, or with the problem that keeps it from being processed."""
    folder = _frames_folder(root, row, layout)
    listing = list_frames(root / folder, layout)
    problem = ""
    if listing is None:
        found, problem = names.resolve(folder)
        if found is not None:
            folder, listing = found, list_frames(root / found, layout)
    frames, ignored = listing or ([], [])
    if not problem:
        problem = "no folder" if listing is None else ("no frames" if not frames else "")
    return Video(row.split, row.name, folder, tuple(frames), row.speaker, row.gloss,
                 row.translation, problem, tuple(ignored))


def _read_corpora(root: Path, layout: str,
                  splits: Sequence[str]) -> tuple[list[CorpusRow], set[str], str]:
    """(rows of the asked splits, NFC names listed in any split, digest of the asked csv files).

    Every split's csv is read when present, so a name listed twice across splits is refused.
    """
    pattern = _LAYOUTS[layout][0]
    digest = hashlib.sha256()
    rows: list[CorpusRow] = []
    seen: dict[str, tuple[str, str]] = {}  # NFC name -> (name as listed, file:line)
    for split in SPLITS:
        path = root / "annotations" / "manual" / pattern.format(split=split)
        if not path.is_file():
            if split in splits:
                raise DatasetError(
                    f"{path}: missing, but split {split!r} was asked for. Restore it or pass "
                    f"--splits without {split}."
                )
            continue
        split_rows = read_corpus(path, split, layout)
        for r in split_rows:  # names are unique across the whole release, not just per split
            key = nfc(r.name)
            if key in seen:
                first, where = seen[key]
                how = "" if first == r.name else f" as {first!r}, equal in Unicode NFC"
                raise DatasetError(
                    f"{r.source}: video {r.name!r} is listed twice (first at {where}{how}). "
                    "Remove one of the lines."
                )
            seen[key] = (r.name, r.source)
        if split in splits:
            digest.update(path.read_bytes())
            rows.extend(split_rows)
    return rows, set(seen), digest.hexdigest()


def _first_by_name(rows: list[CorpusRow], n: int) -> list[CorpusRow]:
    """--max_samples_per_split: the first n videos of each split by folder name, as the older
    script chose them (sorted folder names), whatever their corpus order."""
    keep: set[tuple[str, str]] = set()
    for split in dict.fromkeys(r.split for r in rows):
        names = sorted(nfc(r.name) for r in rows if r.split == split)
        keep.update((split, name) for name in names[:n])
    return [r for r in rows if (r.split, nfc(r.name)) in keep]


def _select(rows: list[CorpusRow], listed: set[str], splits: Sequence[str],
            videos: Iterable[str] | None, limit_videos: int | None,
            max_per_split: int | None = None) -> list[CorpusRow]:
    """--videos (by name, in NFC), --limit-videos (first N of each split, in corpus order) and
    --max_samples_per_split (first N of each split by name)."""
    if videos is not None:
        wanted = list(dict.fromkeys(videos))
        unknown = [n for n in wanted if nfc(n) not in listed]
        if unknown:
            raise DatasetError(
                f"--videos: {', '.join(unknown[:5])} not listed in the corpus of split(s) "
                f"{','.join(splits)}."
            )
        keep = {nfc(n) for n in wanted}
        rows = [r for r in rows if nfc(r.name) in keep]
    if limit_videos is not None:
        per_split: dict[str, int] = {}
        kept = []
        for r in rows:
            per_split[r.split] = per_split.get(r.split, 0) + 1
            if per_split[r.split] <= limit_videos:
                kept.append(r)
        rows = kept
    if max_per_split is not None:
        rows = _first_by_name(rows, max_per_split)
    return rows


def discover(
    root: Path,
    splits: Sequence[str] = SPLITS,
    videos: Iterable[str] | None = None,
    limit_videos: int | None = None,
    max_per_split: int | None = None,
) -> Dataset:
    """Read the corpus, select videos (splits, names, first N per split) and list their frames."""
    root = Path(root)
    layout = detect_layout(root)
    for s in splits:
        if s not in SPLITS:
            raise DatasetError(f"--splits: unknown split {s!r}; use some of {','.join(SPLITS)}.")
    rows, listed, digest = _read_corpora(root, layout, splits)
    rows = _select(rows, listed, splits, videos, limit_videos, max_per_split)
    names = _NameIndex(root)
    out = [_video(root, r, layout, names) for r in rows]
    selected = videos is not None or limit_videos is not None or max_per_split is not None
    unlisted = [] if selected else \
        _unlisted(root, splits, {v.folder for v in out})
    # Output order is (split, video) ascending, the order of keypoints.parquet.
    out.sort(key=lambda v: (v.split, v.name))
    return Dataset(root, layout, out, sorted(unlisted), digest)


# --- a selection without a single frame: where we looked and what we expected -------------------
_EXPECTED = {LAYOUT_T: "<split>/<name>/images0001.png, images0002.png, ...",
             LAYOUT_2014: "<split>/<id>/1/*.png"}
_SHOWN = 5


def _names(videos: Sequence[Video]) -> str:
    shown = ", ".join(f"{v.split}/{v.name}" for v in videos[:_SHOWN])
    return shown + (" ..." if len(videos) > _SHOWN else "")


def _count(videos: Sequence[Video]) -> str:
    return f"{len(videos)} {'has' if len(videos) == 1 else 'have'}"


def _frames_one_deeper(ds: Dataset, videos: Sequence[Video]) -> str | None:
    """A frame in a subfolder of a video's folder (`<name>/1/images0001.png`, as the T csv's
    `<name>/1/*.png` suggests), or None; only the first few videos are looked into."""
    for v in videos[:_SHOWN]:
        for name, reason in v.ignored:
            if reason != IGNORED_FOLDER:
                continue
            found = list_frames(ds.root / v.folder / name, ds.layout)
            if found and found[0]:
                return f"{ds.root / v.folder / name / found[0][0]}"
    return None


def _without_folder(ds: Dataset, videos: Sequence[Video]) -> str:
    base = ds.root / FRAMES_DIR
    bit = f"{_count(videos)} no folder under {base}/<split>/ ({_names(videos)})"
    gone = sorted({v.split for v in videos if not (base / v.split).is_dir()})
    if gone:
        bit += f"; {', '.join(f'{base / s}/' for s in gone)} missing"
    flat = [v for v in videos[:_SHOWN] if (base / v.name).is_dir()]
    if flat:
        bit += (f"; {base / flat[0].name}/ exists without its split folder (move it to "
                f"{base / flat[0].split / flat[0].name}/)")
    return bit


def no_frames_message(ds: Dataset) -> str:
    """Why a selection holds no frame at all: where it looked, what it expected, what it found."""
    base = ds.root / FRAMES_DIR
    expected = f"expected {base}/{_EXPECTED[ds.layout]}"
    if not ds.videos:
        return (f"no frames found: the corpus files under {ds.root / 'annotations/manual'} list no "
                f"video for this selection ({expected}). Check --splits, --videos and the csv files.")
    bits = []
    no_folder = [v for v in ds.videos if v.problem == "no folder"]
    if no_folder:
        bits.append(_without_folder(ds, no_folder))
    empty = [v for v in ds.videos if v.problem == "no frames"]
    if empty:
        bit = f"{_count(empty)} a folder without frames ({_names(empty)})"
        deeper = _frames_one_deeper(ds, empty)
        if deeper:
            bit += f"; frames are one folder too deep, e.g. {deeper}"
        bits.append(bit)
    other = [v for v in ds.videos if v.problem not in ("no folder", "no frames")]
    if other:
        bits.append(", ".join(f"{v.split}/{v.name}: {v.problem}" for v in other[:_SHOWN]))
    return (f"no frames found: of the {len(ds.videos)} listed video(s), {'; '.join(bits)} "
            f"({expected}). Check that --dataset is the folder holding annotations/ and features/.")
