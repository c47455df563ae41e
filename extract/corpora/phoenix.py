"""PHOENIX-2014-T and PHOENIX-2014: corpus csv files, their splits, and each video's frame files.

Two releases are understood and told apart by their corpus files:
- PHOENIX-2014-T: `annotations/manual/PHOENIX-2014-T.<split>.corpus.csv`,
  header `name|video|start|end|speaker|orth|translation`; the csv says `<name>/1/*.png` but frames
  lie in `features/fullFrame-210x260px/<split>/<name>/images0001.png` (no `1/`).
- PHOENIX-2014: `annotations/manual/<split>.corpus.csv`, header `id|folder|signer|annotation`;
  frames really are in `features/fullFrame-210x260px/<split>/<id>/1/<rec>.avi_pid0_fn000000-0.png`.

Everything the csv says is checked before it is trusted: a bad file is refused with its path, line
and what to do, never half-read. A listed video with no folder or no frames is kept, with its
problem, so that plan, status and the end of a run can report it.

A video's frames are the names the release gives them (FRAME_NAMES), read by the folder source
(extract/sources/folder.py: what is no frame is kept in Video.ignored, to be reported).

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
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from phoenix_keypoints.extract.corpora.base import SHOWN as _SHOWN
from phoenix_keypoints.extract.corpora.base import (
    SPLITS,
    Dataset,
    DatasetError,
    Video,
    check_splits,
    count,
    located,
    names,
    nfc,
    read_corpus_text,
    safe_component,
    safe_relative,
    select,
    unique_names,
)
from phoenix_keypoints.extract.sources import links
from phoenix_keypoints.extract.sources.base import shown
from phoenix_keypoints.extract.sources.folder import IGNORED_FOLDER, FolderSource, NameIndex, scandir
from phoenix_keypoints.extract.sources.folder import list_frames as _list_frames

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

# What the release calls a frame, per layout (whole name, case as shipped): the T release's frames
# are images0001.png...; PHOENIX-2014's are `<rec>.avi_pid0_fn000000-0.png`, but what its csv
# promises is only `<id>/1/*.png`, so any visible .png there is a frame (a stricter pattern that
# missed one real frame would lose it silently).
FRAME_NAMES: dict[str, re.Pattern[str]] = {
    LAYOUT_T: re.compile(r"images[0-9]+\.png"),
    LAYOUT_2014: re.compile(r"[^.].*\.png", re.DOTALL),
}

_FOLDERS = FolderSource()


def list_frames(folder: Path, layout: str = LAYOUT_T):
    """A PHOENIX folder's frames and ignored entries (extract/sources/folder.py: list_frames)."""
    return _list_frames(folder, FRAME_NAMES[layout])


def detect_layout(root: Path) -> str | None:
    """Which release `root` is, from its corpus files; None when it is neither."""
    manual = root / "annotations" / "manual"
    for layout, (pattern, _, _) in _LAYOUTS.items():
        if any((manual / pattern.format(split=s)).is_file() for s in SPLITS):
            return layout
    return None


def inner_hint(root: Path) -> str:
    """A PHOENIX tree one folder down (the release's own top folder): pass that instead."""
    if root.is_dir():
        inner = [p.name for p in root.iterdir() if (p / "annotations" / "manual").is_dir()]
        if inner:
            return f" It has {inner[0]}/ inside: pass --dataset {root / inner[0]}."
    return ""


@dataclass(frozen=True)
class CorpusRow:
    split: str
    name: str
    folder: str  # csv's folder field, relative posix, without the trailing glob
    speaker: str
    gloss: str
    translation: str
    source: str  # "file:line", for messages


def read_corpus(path: Path, split: str, layout: str) -> list[CorpusRow]:
    """Parse one corpus csv, refusing anything that does not have the release's exact shape."""
    _, columns, (c_name, c_folder, c_speaker, c_gloss, c_trans) = _LAYOUTS[layout]
    try:
        text = read_corpus_text(path)[0]
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
    for where, line in located(path, lines[1:], first=2):
        fields = line.split("|")
        if len(fields) != len(header):
            raise DatasetError(
                f"{where}: {len(fields)} fields where the header has {len(header)} "
                "('|' inside a field, or a broken line). Fix that line."
            )
        name = safe_component(fields[col[c_name]].strip(), c_name, where)
        folder_field = safe_relative(fields[col[c_folder]].strip(), where)
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


def _frames_folder(row: CorpusRow, layout: str) -> str:
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
        if not split_dir.is_dir() or links.outside(root, split_dir):
            continue  # (a folder behind a link leaving the dataset: its entries are not named)
        for e in scandir(split_dir):
            rel = f"{FRAMES_DIR}/{split}/{e.name}"
            if e.is_dir() and not {rel, rel + "/1"} & listed_dirs:
                unlisted.append(f"{split}/{shown(e.name)}")
    return unlisted


class _SplitNames:
    """The names in the frames folder and in each split's, listed once (NFC, casefolded): a row
    whose split or video folder is not among them has no folder, said without the per-row lookups
    (2,000,000 listed videos that do not exist took minutes)."""

    def __init__(self, root: Path) -> None:
        self.root, self._names = root, {}

    def _listed(self, rel: str) -> set[str] | None:
        if rel not in self._names:
            try:
                self._names[rel] = {nfc(e.name).casefold() for e in scandir(self.root / rel)}
            except OSError:
                self._names[rel] = None  # absent or unreadable: the scan says why
        return self._names[rel]

    def surely_missing(self, folder: str) -> bool:
        """features/fullFrame-210x260px/<split>/<first>...: no split or no first folder there."""
        parts = PurePosixPath(folder).parts
        for depth in (2, 3):
            names = self._listed("/".join(parts[:depth]))
            if names is None or len(parts) <= depth:
                return False
            if nfc(parts[depth]).casefold() not in names:
                return True
        return False


def _video(root: Path, row: CorpusRow, layout: str, index: NameIndex,
           split_names: _SplitNames | None = None) -> Video:
    """A corpus row with its frames listed, or with the problem that keeps it from being processed."""
    folder = _frames_folder(row, layout)
    if split_names is not None and split_names.surely_missing(folder):
        return Video(row.split, row.name, folder, (), row.speaker, row.gloss, row.translation,
                     index.misread(folder) or "no folder")
    scan = _FOLDERS.scan(root, folder, FRAME_NAMES[layout], index)
    return Video(row.split, row.name, scan.locator, scan.files, row.speaker, row.gloss,
                 row.translation, scan.problem, scan.ignored, frame_links=scan.links)


def _read_corpora(root: Path, layout: str,
                  splits: Sequence[str]) -> tuple[list[CorpusRow], set[str], str]:
    """(rows of the asked splits, NFC names listed in any split, digest of the asked csv files).

    Every split's csv is read when present, so a name listed twice across splits is refused.
    """
    pattern = _LAYOUTS[layout][0]
    digest = hashlib.sha256()
    rows: list[CorpusRow] = []
    every: list[CorpusRow] = []
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
        every.extend(split_rows)  # names are unique across the whole release, not just per split
        if split in splits:
            digest.update(path.read_bytes())
            rows.extend(split_rows)
    return rows, unique_names(every), digest.hexdigest()


class Phoenix:
    """PHOENIX-2014-T and PHOENIX-2014 (told apart by their corpus files)."""

    name = "phoenix"
    placeholder = "--dataset PHOENIX_ROOT"
    layouts = (LAYOUT_T, LAYOUT_2014)

    def detect(self, root: Path) -> bool:
        return detect_layout(root) is not None

    def read(self, root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None) -> Dataset:
        """Read the corpus, select videos (splits, names, first N per split) and list their frames."""
        layout = detect_layout(root)
        if layout is None:
            raise DatasetError(f"--dataset {root}: not a PHOENIX tree (no corpus csv files).")
        check_splits(splits)
        rows, listed, digest = _read_corpora(root, layout, splits)
        rows = select(rows, listed, splits, videos, limit_videos, max_per_split)
        index, split_names = NameIndex(root), _SplitNames(root)
        out = [_video(root, r, layout, index, split_names) for r in rows]
        selected = videos is not None or limit_videos is not None or max_per_split is not None
        unlisted = [] if selected else _unlisted(root, splits, {v.folder for v in out})
        # Output order is (split, video) ascending, the order of keypoints.parquet.
        out.sort(key=lambda v: (v.split, v.name))
        ds = Dataset(root, layout, out, sorted(unlisted), digest)
        ds.corpus_files = [f"annotations/manual/{_LAYOUTS[layout][0].format(split=s)}" for s in SPLITS
                           if (root / "annotations" / "manual" / _LAYOUTS[layout][0].format(split=s))
                           .is_file()]
        return ds

    def no_frames_message(self, ds: Dataset) -> str:
        return no_frames_message(ds)


CORPUS = Phoenix()


def discover(root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None) -> Dataset:
    """A PHOENIX tree's selected videos (extract/corpora/__init__.py detects any corpus)."""
    return CORPUS.read(Path(root), splits, videos, limit_videos, max_per_split)


# --- a selection without a single frame: where we looked and what we expected -------------------
_EXPECTED = {LAYOUT_T: "<split>/<name>/images0001.png, images0002.png, ...",
             LAYOUT_2014: "<split>/<id>/1/*.png"}


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
    bit = f"{count(videos)} no folder under {base}/<split>/ ({names(videos)})"
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
        bit = f"{count(empty)} a folder without frames ({names(empty)})"
        deeper = _frames_one_deeper(ds, empty)
        if deeper:
            bit += f"; frames are one folder too deep, e.g. {deeper}"
        bits.append(bit)
    other = [v for v in ds.videos if v.problem not in ("no folder", "no frames")]
    if other:
        bits.append(", ".join(f"{v.split}/{v.name}: {v.problem}" for v in other[:_SHOWN]))
    return (f"no frames found: of the {len(ds.videos)} listed video(s), {'; '.join(bits)} "
            f"({expected}). Check that --dataset is the folder holding annotations/ and features/.")
