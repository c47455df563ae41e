"""CSL-Daily: JPEG frame folders, `split_1.txt`, and the labels pickle when present.

- Frames: `sentence/frames_512x512/<name>/<number>.jpg`, one folder per sentence video, named by
  the folder (the corpus's own name); any visible .jpg/.jpeg there is a frame, in numeric order.
- Splits: `sentence_label/split_1.txt`, header `name|split`, values train/dev/test.
- Labels: `sentence_label/csl2020ct_v2.pkl`, a dict whose `info` lists dicts with `name`,
  `length`, `label_gloss`, `label_char`, `label_word` and `signer`: gloss tokens joined by spaces are
  the gloss, the characters joined the translation, the signer the speaker; `label_word` and
  `length` go into `extra`. The pickle is read with an unpickler that builds only plain containers,
  strings, numbers and numpy arrays: a tampered file that would run code when loaded is refused
  with a message, never executed. Without the pickle, videos have no text.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from collections.abc import Iterable, Sequence
from pathlib import Path

from extract.corpora.base import SPLITS, Dataset, DatasetError
from extract.corpora.entries import Listing, build

LAYOUT = "csl-daily"
FRAMES = "sentence/frames_512x512"
SPLIT_FILE = "sentence_label/split_1.txt"
LABELS = "sentence_label/csl2020ct_v2.pkl"

# What the labels pickle may build: plain containers and numbers, and numpy arrays.
_ALLOWED = {
    ("builtins", n) for n in ("dict", "list", "tuple", "set", "frozenset", "str", "bytes",
                             "bytearray", "int", "float", "complex", "bool", "slice")
} | {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"),  # how protocol 2 pickles numpy's raw bytes
}


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"it asks for {module}.{name}")
        return super().find_class(module, name)


def load_labels(path: Path) -> dict[str, dict]:
    """name -> its label dict, read without running anything the file asks for."""
    try:
        data = _Restricted(io.BytesIO(path.read_bytes())).load()
    except pickle.UnpicklingError as e:
        raise DatasetError(f"{path}: refused: {e}, which a labels file has no need of (loading it "
                           "could run code). Use the file as released.") from None
    except (OSError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise DatasetError(f"{path}: not a readable labels pickle ({type(e).__name__}: {e}).") from None
    info = data.get("info") if isinstance(data, dict) else None
    if not isinstance(info, list):
        raise DatasetError(f"{path}: expected a dict with an `info` list of per-video dicts.")
    return {str(d.get("name")): d for d in info if isinstance(d, dict)}


def read_splits(path: Path) -> list[tuple[str, str, str]]:
    """(name, split, "file:line") of each line of split_1.txt."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read as UTF-8 text ({e}).") from None
    if not lines or lines[0].strip().split("|") != ["name", "split"]:
        raise DatasetError(f"{path}:1: expected the header name|split.")
    out = []
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 2 or not fields[0] or "/" in fields[0] or fields[1] not in SPLITS:
            raise DatasetError(f"{path}:{lineno}: expected name|split with split one of "
                               f"{', '.join(SPLITS)}; got {line!r}.")
        out.append((fields[0], fields[1], f"{path}:{lineno}"))
    return out


def _tokens(value: object, sep: str) -> str:
    if isinstance(value, (list, tuple)):
        return sep.join(str(v) for v in value)
    return "" if value is None else str(value)


def _listing(name: str, split: str, where: str, label: dict | None) -> Listing:
    if label is None:
        return Listing(split, name, f"{FRAMES}/{name}", where)
    extra = {"label_word": _tokens(label.get("label_word"), " "), "length": label.get("length")}
    return Listing(split, name, f"{FRAMES}/{name}", where, speaker=str(label.get("signer", "")),
                   gloss=_tokens(label.get("label_gloss"), " "),
                   translation=_tokens(label.get("label_char"), ""),
                   extra=json.dumps(extra, ensure_ascii=False, sort_keys=True, default=str))


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
        labels: dict[str, dict] = {}
        if (root / LABELS).is_file():
            labels = load_labels(root / LABELS)
            digest.update((root / LABELS).read_bytes())
        listings = [_listing(n, s, w, labels.get(n)) for n, s, w in read_splits(root / SPLIT_FILE)]
        return build(root, LAYOUT, listings, digest.hexdigest(), splits, videos, limit_videos,
                     hint=f"Expected frames in {root / FRAMES}/<name>/<number>.jpg.")


CORPUS = CslDaily()
