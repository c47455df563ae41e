"""Glue between a run folder and extract/'s tensors and exports (`tensors`, `export`, --output_path).

The arithmetic lives in extract/; this only knows where a run keeps things: keypoints.parquet, the
corpus fields in plan.parquet, the tensors/ folder, and run.json's record of the sets written.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.estimator import (
    Declaration,
    declaration,
    export_refused,
    family,
)
from phoenix_keypoints.extract.outputs.declared import declared_spec, write_family_tensors
from phoenix_keypoints.extract.outputs.loader import load_meta, load_split
from phoenix_keypoints.extract.outputs.tensors import TensorsError, TensorSpec, file_table, tag_dir
from phoenix_keypoints.jobs import messages
from phoenix_keypoints.jobs.run.identity import corpus_spelling
from phoenix_keypoints.jobs.rundir.folder import JobFailed, RunDir, RunError
from phoenix_keypoints.jobs.rundir.locks import locked
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo


def corpus_from_plan(plan: pa.Table) -> dict[str, dict[str, str]]:
    """video -> {speaker, gloss, translation, extra} from the plan (the corpus files, as discovered;
    extra, a corpus's other columns as JSON, is "" in plans made before it existed)."""
    cols = (plan[c].to_pylist() for c in ("video", "speaker", "gloss", "translation"))
    extra = plan["extra"].to_pylist() if "extra" in plan.column_names else [""] * plan.num_rows
    return {v: {"speaker": s, "gloss": g, "translation": t, "extra": x}
            for v, s, g, t, x in zip(*cols, extra, strict=True)}


def _need_keypoints(rd: RunDir) -> Path:
    if not rd.keypoints_path.is_file():
        raise RunError(f"{rd.path} has no keypoints.parquet yet: finish the run first "
                       f"(`phoenix-keypoints run --out {rd.path}`).")
    return rd.keypoints_path


def outputs_state(rd: RunDir, info: RunInfo) -> str:
    """"ok": the last full merge's outputs are there and whole; "no tensors": the keypoints are,
    the default tensor set is not; "stale": the merge must run (again)."""
    merge = info.merge
    if merge is None or merge.partial or info.merge_interrupted:
        return "stale"
    try:
        if not rd.keypoints_path.is_file() or (  # a FIFO in its place would hang the read
                pq.read_metadata(rd.keypoints_path).num_rows != merge.rows):
            return "stale"
    except (OSError, pa.ArrowException):
        return "stale"
    try:
        meta = load_meta(rd.path)
        ok = meta["source"]["rows"] == merge.rows and all(
            (rd.tensors_dir / f"{s}{ext}").is_file() for s in meta["splits"]
            for ext in (".npy", ".mask.npy", ".index.parquet"))
    except (TensorsError, KeyError, TypeError):
        ok = False
    return "ok" if ok else "no tensors"


def write_set(rd: RunDir, spec: TensorSpec) -> dict[str, Any]:
    """Write one tensor set of a finished run and note it in run.json under `tensors`."""
    rd.load()  # a clear error for a folder that is not a run
    keypoints, decl = _need_keypoints(rd), run_declaration(rd)
    if decl.points is not None:  # its tag and points in the run's numbering (the file's)
        spec = spec.for_run(file_table(keypoints, decl.points))
    else:  # every declared point; refused where it asks what only a point table gives
        spec = declared_spec(decl, spec)
    t0 = time.monotonic()
    frames = write_family_tensors(keypoints, rd.tensors_dir, corpus_from_plan(rd.load_plan()), spec)
    meta = load_meta(rd.path, spec.tag)
    info = {"time": time.time(), "seconds": round(time.monotonic() - t0, 3),
            "dir": str(tag_dir(rd.tensors_dir, spec.tag).relative_to(rd.path)),
            **spec.as_dict(), "points": spec.points.name or meta["preset"],  # a declared set's
            "frames_per_split": frames,
            "not_normalized": len(meta["not_normalized"]), "num_points": meta["num_points"],
            **({"person": meta["person"]} if "person" in meta else {})}  # a multi-person family's
    rd.update(lambda run: run.tensors.__setitem__(spec.tag or "default", info))
    return info


def export_pkl(rd: RunDir, to: Path, tag: str = "") -> int:
    """The pkl export of tensor set `tag` (default: the set `run` writes in tensors/)."""
    from phoenix_keypoints.extract.outputs.export import write_pkl

    rd.load()
    meta = load_meta(rd.path, tag)
    return write_pkl((load_split(rd.path, s, tag, mmap=False) for s in meta["splits"]), to)


def run_facts(info: RunInfo, rd: RunDir, dataset_path: str | None = None) -> dict[str, Any]:
    """What a family's own export may need to know of the run (its writer's `run`): the corpus
    (its layout, the dataset path as the user gave it, the splits), the family's recorded
    settings, the versions, the workers, each split's share of the wall time, where it lies."""
    return {"layout": info.dataset.layout, "source_path": corpus_spelling(info, dataset_path),
            "splits": list(info.options.splits), "settings": dict(info.options.recorded),
            "versions": dict(info.versions),
            "workers": info.extraction.workers if info.extraction else info.plan.workers,
            "max_samples_per_split": info.options.max_samples_per_split,
            "run_dir": str(rd.path.resolve()), "keypoints": str(rd.keypoints_path.resolve()),
            "split_seconds": split_seconds(info)}


def split_seconds(info: RunInfo) -> dict[str, float]:
    """Each split's share of the last extraction's wall time, in proportion to its frames."""
    ex, merge = info.extraction, info.merge
    if ex is None or merge is None or ex.first_frame is None or ex.last_frame is None:
        return {}
    total = sum(merge.frames_per_split.values()) or 1
    wall = max(0.0, ex.last_frame - ex.first_frame)
    return {s: round(wall * n / total, 3) for s, n in merge.frames_per_split.items()}


def export_for_run(rd: RunDir, fmt: str, to: Path, dataset_path: str | None = None) -> str:
    """Export `fmt` of the run's family (`run --output_path`: --format legacy-pkl), its line."""
    info = rd.load()
    write = family(declaration(info.options.settings()).name).EXPORTS[fmt]
    return write(_need_keypoints(rd), to, run=run_facts(info, rd, dataset_path))


def pkl_record(to: Path, info: RunInfo, source_path: str) -> dict[str, Any]:
    """What run.json keeps of a pkl `run --output_path` wrote: the file (size, mtime), the merge it
    was written from and the dataset spelling in its paths; equal again means nothing to rewrite."""
    try:
        st = to.stat()
    except OSError:
        return {}
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "source_path": source_path,
            "merged": info.merge.time if info.merge else None}


def export_pose(rd: RunDir, to: Path, fps: float | None = None) -> int:
    """One .pose file per video (the family's own header, else one made from its declaration)
    from keypoints.parquet, each at its source's rate (a video file's stream), frame
    folders at `fps` (PHOENIX's 25 by default)."""
    from phoenix_keypoints.extract.outputs.export import PHOENIX_FPS

    info = rd.load()
    decl, keypoints = declaration(info.options.settings()), _need_keypoints(rd)
    fps, root = fps or PHOENIX_FPS, Path(info.dataset.root)
    own = family(decl.name).write_pose_files(keypoints, to, fps, root)
    if own is not None:  # a family with a header of its own (one of pose-format's)
        return own
    from phoenix_keypoints.extract.outputs.export import write_declared_pose_files

    return write_declared_pose_files(keypoints, to, decl, fps, root)


def run_declaration(rd: RunDir) -> Declaration:
    return declaration(rd.load().options.settings())


def write_set_command(rd: RunDir, spec: TensorSpec) -> int:
    """`tensors`: one more tensor set of a finished run (under the run's lock)."""
    with locked(rd):
        try:
            info = write_set(rd, spec)
        except OSError as e:  # disk full, quota: write_tensors removed its temp folder
            raise JobFailed(f"cannot write the tensor set in {rd.tensors_dir} ({e}). Free space or "
                            "fix permissions, then run the same `tensors` command again.") from None
    per_split = ", ".join(f"{s} {n}" for s, n in sorted(info["frames_per_split"].items()))
    messages.result(f"tensors:   {rd.path / info['dir']}/ ({info['num_points']} points; "
                    f"{per_split} frames)")
    if "person" in info:
        messages.result(f"person:    {info['person']}")
    if info["not_normalized"]:
        messages.note(f"{info['not_normalized']} video(s) have no pose in any frame and were left "
                      "unnormalised (index column `normalized`, points.json `not_normalized`)")
    return 0


def export_own(rd: RunDir, fmt: str, to: Path, tag: str, write: Callable[..., str],
               flat: bool = False) -> int:
    """An export a family writes itself (its `EXPORTS`): the layouts its models' loaders read.
    A writer gets `flat`, `tag`, `run` (run_facts) and `note` (a line for stderr: what the layout
    left out) where it names them as parameters, and refuses them itself; one that does not name
    them is refused them here."""
    takes = inspect.signature(write).parameters
    if flat and "flat" not in takes:
        raise RunError(f"--flat applies to an export that writes a file per video into split "
                       f"folders (its family's own, such as --format unisign-pkl), not --format {fmt}.")
    if tag and "tag" not in takes:
        raise RunError(f"--tag applies to --format pkl: --format {fmt} holds all points, read "
                       "from keypoints.parquet.")
    options: dict[str, Any] = {"flat": True} if flat else {}  # only a per-video export takes it
    options |= {"tag": tag} if tag else {}
    if "run" in takes:
        options["run"] = run_facts(rd.load(), rd)
    if "note" in takes:
        options["note"] = messages.note
    messages.result(write(_need_keypoints(rd), to, **options))
    return 0


def export_command(rd: RunDir, fmt: str, to: Path, tag: str = "", fps: float | None = None,
                   flat: bool = False) -> int:
    """`export`: the keypoints as a pkl dict (of a tensor set), .pose files, or a family's own
    layouts (the older pipeline's pkl / npz, Kaggle's islr); refused where the run's family does
    not list `fmt`."""
    from phoenix_keypoints.extract.outputs.export import to_refused

    decl = run_declaration(rd)
    why = export_refused(decl, fmt, rd.path) or to_refused(fmt, to)
    if why:
        raise RunError(why)
    own = family(decl.name).EXPORTS.get(fmt)
    if own is not None:
        return export_own(rd, fmt, to, tag, own, flat)
    if flat:
        raise RunError(f"--flat applies to an export that writes a file per video into split "
                       f"folders (its family's own, such as --format unisign-pkl), not --format {fmt}.")
    if fmt == "pkl":
        n = export_pkl(rd, to, tag)
    else:
        if tag:
            raise RunError("--tag applies to --format pkl: .pose files hold all points, read from "
                           "keypoints.parquet.")
        n = export_pose(rd, to, fps)
    messages.result(f"{fmt}: {to} ({n} videos)")
    return 0
