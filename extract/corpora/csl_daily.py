"""CSL-Daily: JPEG frame folders, `split_1.txt`, and the labels pickle when present.

- Frames: `sentence/frames_512x512/<name>/<number>.jpg`, one folder per sentence video, named by
  the folder (the corpus's own name); any visible .jpg/.jpeg there is a frame, in numeric order.
- Splits: `sentence_label/split_1.txt`, header `name|split`, values train/dev/test.
- Labels: `sentence_label/csl2020ct_v2.pkl`, a dict whose `info` lists dicts with `name`,
  `length`, `label_gloss`, `label_char`, `label_word` and `signer`: gloss tokens joined by spaces are
  the gloss, the characters joined the translation, the signer the speaker; `label_word` and
  `length` go into `extra`. The pickle is read by extract/corpora/safe_pickle.py: only plain
  containers, strings, numbers and numpy arrays are built, within a memory budget tied to the
  file's size; a tampered file that would run code, or take without bound, is refused with a
  message, never executed; a truncated one is called so. Without the pickle, videos have no text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phoenix_keypoints.extract.corpora import safe_pickle
from phoenix_keypoints.extract.corpora.base import (
    SPLITS,
    Dataset,
    DatasetError,
    located,
    read_corpus_text,
)
from phoenix_keypoints.extract.corpora.entries import Listing, build
from phoenix_keypoints.extract.keypoints.words import a

LAYOUT = "csl-daily"
FRAMES = "sentence/frames_512x512"
SPLIT_FILE = "sentence_label/split_1.txt"
LABELS = "sentence_label/csl2020ct_v2.pkl"

@dataclass(frozen=True)
class Label:
    """What a video's entry in the labels pickle gives its outputs."""

    speaker: str
    gloss: str
    translation: str
    extra: str  # label_word and length, one JSON object


def load_labels(path: Path) -> dict[str, Label]:
    """name -> its label, read without running anything the file asks for and within a memory
    budget tied to the file's size (extract/corpora/safe_pickle.py)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror}).") from None
    budget = safe_pickle.Budget.for_size(len(data))
    advice = "Use the file as released (download it again if it may be damaged)."
    try:
        return _labels(safe_pickle.load(data, budget), budget)
    except safe_pickle.Forbidden as e:
        raise DatasetError(f"{path}: refused: {e}. {advice}") from None
    except safe_pickle.TooCostly as e:
        raise DatasetError(
            f"{path}: refused: {e}; a labels pickle of {len(data)} bytes may build at most "
            f"{safe_pickle.PER_BYTE}x its size + {safe_pickle.BASE // 2**20} MiB. {advice}") from None
    except safe_pickle.Damaged as e:
        raise DatasetError(f"{path}: not a readable labels pickle: {e}. {advice}") from None
    except (MemoryError, RecursionError) as e:
        what = "ran out of memory" if isinstance(e, MemoryError) else "nests too deep to read"
        raise DatasetError(f"{path}: loading it {what} ({type(e).__name__}): the file is damaged "
                           f"or crafted. {advice}") from None


def _labels(data: object, budget: safe_pickle.Budget) -> dict[str, Label]:
    """Each entry of `info` as the text its video's outputs carry; an entry of another shape is
    refused with where it is (its strings are charged to the load's budget: entries may share
    one long list many times over)."""
    info = data.get("info") if isinstance(data, dict) else None
    if not isinstance(info, list):
        raise safe_pickle.Damaged("expected a dict with an `info` list of per-video dicts")
    out: dict[str, Label] = {}
    for k, d in enumerate(info):
        if not isinstance(d, dict):
            continue
        name = d.get("name")
        try:
            if not isinstance(name, str):
                raise ValueError(f"name is {type(name).__name__}, not a string")
            extra = {"label_word": _tokens(d.get("label_word"), " "), "length": _number(d.get("length"))}
            label = Label(_scalar_text(d.get("signer", "")), _tokens(d.get("label_gloss"), " "),
                          _tokens(d.get("label_char"), ""),
                          json.dumps(extra, ensure_ascii=False, sort_keys=True, default=str))
        except ValueError as e:
            raise safe_pickle.Damaged(f"info[{k}] ({str(name)[:40] if isinstance(name, str) else '?'}"
                                      f"): {e}") from None
        budget.charge(sum(len(v) * 4 + 80 for v in (name, *vars(label).values())), f"info[{k}]")
        out[name] = label
    return out


_SCALARS = (str, int, float, np.integer, np.floating)


def _scalar_text(value: object) -> str:
    """A label field that is one value: its text (a container's repr has no bound: refused)."""
    if value is None:
        return ""
    if not isinstance(value, _SCALARS) or isinstance(value, int) and value.bit_length() > 64:
        raise ValueError(f"{a(type(value).__name__)} where a string or number belongs")
    return str(value)


def _number(value: object) -> object:
    if value is not None and not isinstance(value, _SCALARS[1:]):
        raise ValueError(f"length is {type(value).__name__}, not a number")
    return value


def _tokens(value: object, sep: str) -> str:
    if isinstance(value, (list, tuple)):
        return sep.join(_scalar_text(v) for v in value)
    return _scalar_text(value)


def read_splits(path: Path) -> list[tuple[str, str, str]]:
    """(name, split, "file:line") of each line of split_1.txt."""
    try:
        text = read_corpus_text(path, "utf-8-sig")[0]
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read as UTF-8 text ({e}).") from None
    lines = text.splitlines()
    if not lines or lines[0].strip().split("|") != ["name", "split"]:
        raise DatasetError(f"{path}:1: expected the header name|split.")
    out = []
    for where, line in located(path, lines[1:], first=2):
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 2 or not fields[0] or "/" in fields[0] or fields[1] not in SPLITS:
            raise DatasetError(f"{where}: expected name|split with split one of "
                               f"{', '.join(SPLITS)}; got {line!r}.")
        out.append((fields[0], fields[1], where))
    return out


def _listing(name: str, split: str, where: str, label: Label | None) -> Listing:
    if label is None:
        return Listing(split, name, f"{FRAMES}/{name}", where)
    return Listing(split, name, f"{FRAMES}/{name}", where, speaker=label.speaker, gloss=label.gloss,
                   translation=label.translation, extra=label.extra)


class CslDaily:
    name = LAYOUT
    placeholder = "--dataset CSL_DAILY_ROOT"

    def detect(self, root: Path) -> bool:
        return (root / SPLIT_FILE).is_file() or (root / FRAMES).is_dir()

    def read(self, root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None, max_per_split: int | None = None) -> Dataset:
        if not (root / SPLIT_FILE).is_file():
            raise DatasetError(f"--dataset {root}: CSL-Daily frames without {SPLIT_FILE}: restore it "
                               "(it says which split each video is in).")
        digest = hashlib.sha256((root / SPLIT_FILE).read_bytes())
        labels: dict[str, Label] = {}
        if (root / LABELS).is_file():
            labels = load_labels(root / LABELS)
            digest.update((root / LABELS).read_bytes())
        listings = [_listing(n, s, w, labels.get(n)) for n, s, w in read_splits(root / SPLIT_FILE)]
        ds = build(root, LAYOUT, listings, digest.hexdigest(), splits, videos, limit_videos,
                   hint=f"Expected frames in {root / FRAMES}/<name>/<number>.jpg.")
        ds.corpus_files = [f for f in (SPLIT_FILE, LABELS) if (root / f).is_file()]
        return ds


CORPUS = CslDaily()
