"""Symbolic links in a dataset on disk: one policy for every corpus and frame source.

Data is often spread over disks with links, so links are followed. But a link can also lead a
dataset someone else packed to files of this host (`frames -> /etc`), so following one is never
silent:
- a video whose folder or file is reached through a link, and a frame file that is a link leaving
  the dataset, record the resolved target (plan.parquet `links`, "path -> target");
- links leaving the dataset's folder (a manifest's: its folder) are counted and named in run.json
  (`dataset.links_outside`) and in one line at the start of the run; links inside are counted;
- `--no-follow-links` leaves out the videos behind a link leaving the dataset, each with that
  problem, and does not walk into such a folder;
- nothing found behind a link leaving the dataset is named in run.json or plan.parquet unless it is
  read as a frame or video (entries that are no frames are counted only, in the video's note).
Inside an archive, a symlink member is never followed to a host file: it is no frame
(extract/sources/archive.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

_POLICY = {"follow": True}
SHOWN = 10  # links leaving the dataset named in run.json (all are counted)


@contextmanager
def following(follow: bool) -> Iterator[None]:
    """Read a dataset under this policy (walks consult it while the corpus is listed)."""
    before = _POLICY["follow"]
    _POLICY["follow"] = follow
    try:
        yield
    finally:
        _POLICY["follow"] = before


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip("/") + "/")


def target(root: Path, rel: str) -> str:
    """The resolved path of root/rel when a link lies on the way to it (below root), else ""."""
    root_real = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, rel))
    return real if real != os.path.normpath(os.path.join(root_real, rel)) else ""


def leaves(root: Path, real: str) -> bool:
    return not _inside(real, os.path.realpath(root))


def outside(root: Path, path: Path) -> bool:
    """Whether path on disk resolves outside root (a folder inside an archive never does)."""
    return isinstance(path, os.PathLike) and isinstance(root, os.PathLike) and \
        leaves(root, os.path.realpath(path))


def may_enter(root: Path, folder: Path) -> bool:
    """Whether a walk goes into `folder`: always, but a link leaving root under --no-follow-links."""
    return _POLICY["follow"] or not os.path.islink(folder) or not leaves(root, os.path.realpath(folder))


class LinkRefused(Exception):
    """A corpus file behind a link leaving the dataset, under --no-follow-links (refused whole)."""


def check(ds, follow: bool):  # ds: extract.corpora.base.Dataset (no import circle)
    """The dataset with every link on the way to its frames recorded, those leaving it counted and
    named, and (not following them) the videos behind them left out. A corpus file (a csv, a labels
    pickle) behind a link leaving the dataset is counted and named too; not following links, it
    refuses the dataset (raises LinkRefused): its list of videos lies outside."""
    _corpus_files(ds, follow)
    videos = []
    for v in ds.videos:
        if v.source == "archive" or (v.problem and not target(ds.root, v.folder)):
            videos.append(v)  # a video with a problem is still counted when a link leads to it
            continue
        records, out, inside = _links_of(ds.root, v)
        ds.links_inside += inside
        ds.links_outside += out
        if records and v.ignored and outside(ds.root, ds.root / v.folder):
            v = replace(v, ignored=(), note="; ".join(filter(None, (
                v.note, f"{len(v.ignored)} entries there that are no frames skipped, not named "
                "(outside the dataset)"))))
        if out and not follow:
            v = replace(v, files=(), count=0 if v.count is not None else None,
                        problem=f"reached through a link leaving the dataset ({out[0]}); not "
                                "followed (--no-follow-links)")
        videos.append(replace(v, links=tuple(records)))
    ds.videos = videos
    return ds


def _corpus_files(ds, follow: bool) -> None:
    for rel in ds.corpus_files:
        real = target(ds.root, rel)
        if not real:
            continue
        if not leaves(ds.root, real):
            ds.links_inside += 1
            continue
        record = f"{rel} -> {real}"
        if not follow:
            raise LinkRefused(f"--dataset {ds.root}: its corpus file {record} is a link leaving the "
                              "dataset, not followed (--no-follow-links). Copy the file into the "
                              "dataset, or leave out --no-follow-links.")
        ds.links_outside.append(record)


def _links_of(root: Path, v) -> tuple[list[str], list[str], int]:
    """("path -> target" of each link its frames are read through, those of them that leave root,
    how many links stay inside): its folder or file, and each frame file that is a link leaving
    root (frame links inside, such as a content store's, are only counted)."""
    records, out, inside = [], [], 0
    base = target(root, v.folder)
    if base:
        records.append(f"{v.folder} -> {base}")
        if leaves(root, base):
            out.append(records[-1])
        else:
            inside += 1
    for name in v.frame_links:
        real = os.path.realpath(os.path.join(root, v.folder, name))
        if leaves(root, real):
            records.append(f"{v.folder}/{name} -> {real}")
            out.append(records[-1])
        else:
            inside += 1
    return records, out, inside
