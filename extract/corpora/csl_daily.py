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
import math
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
# What the allowed constructors may allocate together, for a file of n bytes: a labels file holds
# its text and arrays in its own bytes, so a 28-byte `ndarray((10**12,))` is refused, not built.
LABELS_ALLOCATION = (8, 32 * 2**20)  # bytes = 8 x n + 32 MiB


class _Refused(pickle.UnpicklingError):
    """The file asks for something a labels file has no need of."""


class _Budget:
    """Bytes the allowed constructors may still allocate; each call is charged before it runs."""

    def __init__(self, limit: int) -> None:
        self.limit, self.left = limit, limit

    def charge(self, nbytes: int, what: str) -> None:
        if nbytes > self.left:
            raise _Refused(f"it asks for {what} of {nbytes:,} bytes, more than a labels file of "
                           f"its size needs (at most {self.limit:,} in all)")
        self.left -= nbytes

    def wrap(self, fn, cost, what: str):
        def bounded(*args, **kwargs):
            self.charge(cost(*args, **kwargs), what)
            return fn(*args, **kwargs)
        return bounded


def _nbytes_of(shape, dtype=float, *_, **__) -> int:
    """What numpy would allocate for an array of that shape and dtype (a buffer given: nothing)."""
    import numpy as np

    if _ or __.get("buffer") is not None:
        return 0
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    return math.prod(int(d) for d in dims) * np.dtype(dtype).itemsize


def _reconstruct_cost(_subtype, shape, dtype, *_) -> int:
    return _nbytes_of(shape, dtype)


def _buffer_cost(x=b"", *_) -> int:
    """bytes(n) / bytearray(n) allocate n; from an object, about its length."""
    return int(x) if isinstance(x, int) else len(x) if hasattr(x, "__len__") else 0


def _container_cost(x=(), *_) -> int:
    """list(x), dict(x), ...: a pointer (or two) per item of what the file already holds."""
    return 16 * len(x) if hasattr(x, "__len__") else 0


class _Restricted(pickle.Unpickler):
    def __init__(self, file, limit: int) -> None:
        super().__init__(file)
        self.budget = _Budget(limit)

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise _Refused(f"it asks for {module}.{name}, which a labels file has no need of "
                           "(loading it could run code)")
        found = super().find_class(module, name)
        if name == "ndarray":
            return _bounded_array(self.budget)
        if name == "_reconstruct":
            return self.budget.wrap(found, _reconstruct_cost, "a numpy array")
        if name in ("bytes", "bytearray"):
            return self.budget.wrap(found, _buffer_cost, name)
        if name in ("list", "tuple", "set", "frozenset", "dict"):
            return self.budget.wrap(found, _container_cost, name)
        return found


def _bounded_array(budget: _Budget) -> type:
    """numpy.ndarray as the pickle sees it: a subclass whose constructor is charged first (it must
    stay a type: numpy's _reconstruct takes it as the array's class)."""
    import numpy as np

    class BoundedArray(np.ndarray):
        def __new__(cls, *args, **kwargs):
            budget.charge(_nbytes_of(*args, **kwargs), "a numpy array")
            return np.ndarray.__new__(np.ndarray, *args, **kwargs)

    return BoundedArray


def load_labels(path: Path) -> dict[str, dict]:
    """name -> its label dict, read without running anything the file asks for, and without
    allocating more than its size warrants (LABELS_ALLOCATION)."""
    try:
        raw = path.read_bytes()
        scale, base = LABELS_ALLOCATION
        data = _Restricted(io.BytesIO(raw), scale * len(raw) + base).load()
    except _Refused as e:
        raise DatasetError(f"{path}: refused: {e}. Use the labels file as released.") from None
    except (pickle.UnpicklingError, EOFError) as e:
        raise DatasetError(f"{path}: truncated or damaged ({type(e).__name__}: {e}): not a whole "
                           "pickle. Download it again.") from None
    except MemoryError:
        raise DatasetError(f"{path}: refused: it declares an object larger than this machine's "
                           "memory, which no labels file holds. Use the file as released.") from None
    except RecursionError:
        raise DatasetError(f"{path}: refused: it nests deeper than Python can follow, which no "
                           "labels file does. Use the file as released.") from None
    except (OSError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            OverflowError) as e:
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
        try:
            listings = [_listing(n, s, w, labels.get(n)) for n, s, w in read_splits(root / SPLIT_FILE)]
        except RecursionError:
            raise DatasetError(f"{root / LABELS}: refused: its labels nest deeper than text can; a "
                               "labels file holds lists of words. Use the file as released.") from None
        return build(root, LAYOUT, listings, digest.hexdigest(), splits, videos, limit_videos,
                     hint=f"Expected frames in {root / FRAMES}/<name>/<number>.jpg.")


CORPUS = CslDaily()
