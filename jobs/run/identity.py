"""Which input a run folder belongs to: one key however the user spells the path, one comparison.

`--dataset` (or `--manifest`, or the older `--dataset_path`) may be typed relative or absolute,
through symlinks or `..`, as an archive alone or as `ARCHIVE/inner`; all name one input, recorded in
run.json as its key (extract.corpora.input_key). `run`, `slurm`, an array task and the older command
line all meet a run folder through `input_conflict`, so they accept and refuse alike.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from phoenix_keypoints.extract.corpora import discover, input_key, placeholder, same_input, spelled_root
from phoenix_keypoints.extract.corpora.base import DatasetError
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.messages import ANY_INPUT, quote
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo


def given_path(info: RunInfo) -> Path:
    """What --dataset (or --manifest) named when the run was planned, resolved: the root, or the
    manifest, clip or frame folder in it."""
    return Path(info.dataset.root) / (info.dataset.manifest or info.dataset.entry)


def manifest_root(info: RunInfo) -> Path | None:
    """The --manifest-root a manifest run was planned with: its root, when the manifest does not
    lie right in it (recorded as a path from the root, or absolute); else None."""
    name = info.dataset.manifest
    return Path(info.dataset.root) if name and Path(name).name != name else None


def run_key(info: RunInfo) -> str:
    """The run's input key: as recorded, or made from its root (run.json written before `key`)."""
    return info.dataset.key or input_key(given_path(info))


def planned_as(info: RunInfo) -> str:
    """The input as the user typed it when the run was planned (older runs: the resolved root)."""
    return info.dataset.given or str(given_path(info))


def input_conflict(asked: Path | None, info: RunInfo) -> str:
    """"" when `asked` (None: not given) names the run's input, else what differs, in the user's
    own spellings of both and, where a spelling hides it (a link re-pointed), the resolved paths."""
    if asked is None or same_input(asked, run_key(info)):
        return ""
    if str(asked) != planned_as(info):
        return f"dataset ({planned_as(info)} when planned, {asked} asked)"
    was, now = run_key(info), os.path.realpath(asked)
    return (f"dataset ({asked}, at {was} when planned, at {now} now): its corpus there has other "
            "videos or frames than the run was planned from (a corpus that only moved is "
            f"followed; to keep the finished parts, give the corpus at {was})")


def follow_move(rd: RunDir, info: RunInfo, asked: Path | None) -> RunInfo:
    """The run with its input at `asked` when the corpus moved there (a data folder copied to
    scratch, a link re-pointed): `asked` is typed as when the run was planned (the same command)
    but resolves elsewhere, and its corpus, listed there, has the listing the run was planned
    from (the same videos, frame names and corpus text). Its committed parts stay, each checked as
    on any resume: a frame whose size or mtime differs at the new place is redone. run.json keeps
    the move (`dataset.moves`). Else `info` unchanged (then refused by input_conflict, which names
    both places)."""
    if asked is None or str(asked) != planned_as(info) or same_input(asked, run_key(info)):
        return info
    o = info.options
    try:
        ds = discover(asked, o.splits, o.videos, o.limit_videos, o.max_samples_per_split,
                      o.follow_links, manifest_root(info))
    except DatasetError:
        return info
    if ds.fingerprint() != info.dataset.fingerprint:
        return info
    move = f"{info.dataset.root} -> {ds.root.resolve()}"
    dataset = replace(info.dataset, root=str(ds.root.resolve()), given=str(asked),
                      key=input_key(asked), moves=[*info.dataset.moves, move])
    new = replace(info, dataset=dataset)
    rd.save(new)
    messages.note(f"the corpus moved: {move}, with the listing the run was planned from; going "
                  "on from there (committed parts are checked against the files there)")
    return new


def corpus_spelling(info: RunInfo, given: str | None = None) -> str:
    """The corpus folder as the user spelt it (`given`, else as typed when planned): the legacy
    pkl's image_paths start with it. A manifest's paths are relative to its folder."""
    typed = given or planned_as(info)
    if info.dataset.manifest or info.dataset.entry:  # rows' paths are relative to its folder
        return str(Path(typed).parent)
    return spelled_root(typed, run_key(info))


def input_arg(info: RunInfo | None, asked: Path | None = None) -> str:
    """The input for a command a message suggests, as the user gave it: typed now, else as typed
    when the run was planned (an archive as the archive, not its corpus's placeholder); the
    placeholder of the run's own corpus kind (`--dataset CSL_DAILY_ROOT`) only for a run.json
    that does not say."""
    flag = "--manifest" if info is not None and info.dataset.manifest else "--dataset"
    if asked is not None:
        return f"{flag} {quote(asked)}"
    if info is not None and info.dataset.given:
        return f"{flag} {quote(info.dataset.given)}"
    return (placeholder(info.dataset.layout) if info is not None else "") or ANY_INPUT
