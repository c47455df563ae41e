"""The corpus readers, and `discover`: which corpus a folder is, and its selected videos.

Readers are tried in CORPORA's order; the first whose `detect` says yes reads the folder (a
manifest is never detected: it is asked for with --manifest). See extract/corpora/base.py for what
a reader produces and how to add one.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from extract.corpora.base import SPLITS, Corpus, Dataset, DatasetError
from extract.corpora.base import no_frames_message as _generic_message

# name -> module holding CORPUS, in detection order (the most specific layouts first)
CORPORA: dict[str, str] = {
    "phoenix": "extract.corpora.phoenix",
}

EXPECTED = ("a PHOENIX-2014-T or PHOENIX-2014 tree (annotations/manual/PHOENIX-2014-T.train.corpus.csv "
            "or train.corpus.csv, and features/fullFrame-210x260px/)")


def corpus(name: str) -> Corpus:
    return importlib.import_module(CORPORA[name]).CORPUS


def detect(root: Path) -> Corpus:
    """The reader for `root`, or a refusal that says what was expected."""
    for name in CORPORA:
        c = corpus(name)
        if c.detect(root):
            return c
    from extract.corpora.phoenix import inner_hint

    what = "does not exist" if not root.exists() else "is not a corpus this tool reads"
    raise DatasetError(f"--dataset {root} {what}: expected {EXPECTED}.{inner_hint(root)} Pass the "
                       "folder that holds annotations/ and features/.")


def discover(root: Path, splits: Sequence[str] = SPLITS, videos: Iterable[str] | None = None,
             limit_videos: int | None = None) -> Dataset:
    """Detect the corpus at root and read its selected videos, sorted by (split, name)."""
    root = Path(root)
    return detect(root).read(root, splits, videos, limit_videos)


def no_frames_message(ds: Dataset) -> str:
    """Why a selection holds no frame at all, in the words of the reader that made it."""
    for name in CORPORA:
        c = corpus(name)
        if ds.layout in getattr(c, "layouts", (c.name,)) and hasattr(c, "no_frames_message"):
            return c.no_frames_message(ds)
    return _generic_message(ds)
