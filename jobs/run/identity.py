"""Which input a run folder belongs to: one key however the user spells the path, one comparison.

`--dataset` (or `--manifest`, or the older `--dataset_path`) may be typed relative or absolute,
through symlinks or `..`, as an archive alone or as `ARCHIVE/inner`; all name one input, recorded in
run.json as its key (extract.corpora.input_key). `run`, `slurm`, an array task and the older command
line all meet a run folder through `input_conflict`, so they accept and refuse alike.
"""

from __future__ import annotations

from pathlib import Path

from extract.corpora import input_key, placeholder, same_input, spelled_root
from jobs.messages import ANY_INPUT, quote
from jobs.rundir.runinfo import RunInfo


def given_path(info: RunInfo) -> Path:
    """What --dataset (or --manifest) named when the run was planned, resolved: the root, or the
    manifest, clip or frame folder in it."""
    return Path(info.dataset.root) / (info.dataset.manifest or info.dataset.entry)


def run_key(info: RunInfo) -> str:
    """The run's input key: as recorded, or made from its root (run.json written before `key`)."""
    return info.dataset.key or input_key(given_path(info))


def planned_as(info: RunInfo) -> str:
    """The input as the user typed it when the run was planned (older runs: the resolved root)."""
    return info.dataset.given or str(given_path(info))


def input_conflict(asked: Path | None, info: RunInfo) -> str:
    """"" when `asked` (None: not given) names the run's input, else what differs, in the user's
    own spellings of both."""
    if asked is None or same_input(asked, run_key(info)):
        return ""
    return f"dataset ({planned_as(info)} when planned, {asked} asked)"


def corpus_spelling(info: RunInfo, given: str | None = None) -> str:
    """The corpus folder as the user spelt it (`given`, else as typed when planned): the legacy
    pkl's image_paths start with it. A manifest's paths are relative to its folder."""
    typed = given or planned_as(info)
    if info.dataset.manifest or info.dataset.entry:  # rows' paths are relative to its folder
        return str(Path(typed).parent)
    return spelled_root(typed, run_key(info))


def input_arg(info: RunInfo | None, asked: Path | None = None) -> str:
    """The input for a command a message suggests: as typed now, else the placeholder of the run's
    own corpus kind (`--dataset CSL_DAILY_ROOT`, `--manifest FILE`)."""
    flag = "--manifest" if info is not None and info.dataset.manifest else "--dataset"
    if asked is not None:
        return f"{flag} {quote(asked)}"
    return (placeholder(info.dataset.layout) if info is not None else "") or ANY_INPUT
