"""The exports Holistic alone has (its `EXPORTS`: `export --format islr | legacy-pkl | legacy-npz`,
and `run --output_path`): Kaggle ISLR's 543-point parquets (islr.py), the older pipeline's
143-point pkl and npz (legacy.py), with the dataset
record that pkl carries, made from what the job says of the run (`run`: jobs/run/outputs.py's
run_facts)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def legacy_dataset_info(run: dict[str, Any]) -> dict[str, Any]:
    """The legacy pkl's dataset_info: source_path is the dataset path as the user gave it."""
    from phoenix_keypoints.extract.corpora.phoenix import LAYOUT_2014, LAYOUT_T

    h, workers = run["settings"], run["workers"]
    names = {LAYOUT_T: "PHOENIX-2014-T", LAYOUT_2014: "PHOENIX-2014"}
    return {
        "name": names.get(run["layout"], run["layout"]),
        "source_path": run["source_path"],
        "splits": list(run["splits"]),
        "processing_info": {
            "extractor": "phoenix-keypoints: MediaPipe Holistic, video mode, tracking reset per video",
            "mediapipe": run["versions"].get("mediapipe", ""),
            **{k: h[k] for k in ("model_complexity", "min_detection_confidence",
                                 "min_tracking_confidence") if k in h},
            "max_samples_per_split": run["max_samples_per_split"],
            # the keys the older script wrote, which its pipeline's progress check prints
            "num_workers": workers,
            "distributed": workers > 1,
            "gpu_optimized": False,  # MediaPipe runs on the CPU here; GPUs only pin workers
            "run_dir": run["run_dir"],
            "keypoints": run["keypoints"],
        },
    }


def _no_tag(tag: str) -> None:
    from phoenix_keypoints.extract.outputs.tensors import TensorsError

    if tag:
        raise TensorsError("--tag applies to --format pkl: the legacy formats always hold their 143 "
                           "points, read from keypoints.parquet.")


def legacy_pkl(keypoints: Path, to: Path, run: dict[str, Any], tag: str = "") -> str:
    """The older script's pkl (../shared/docs/legacy-format.md); the line the command prints."""
    from phoenix_keypoints.extract.families.holistic.legacy import write_legacy_pkl

    _no_tag(tag)
    stats = write_legacy_pkl(keypoints, to, legacy_dataset_info(run), run["split_seconds"])
    per = ", ".join(f"{s} {v['success']} of {v['total']}" for s, v in stats.items() if v["total"])
    failed = sum(v["failed"] for v in stats.values())
    return (f"legacy pkl: {to} (frames kept: {per or 'none'}; {failed} frame(s) with nothing "
            "detected left out, counted in stats)")


def legacy_npz(keypoints: Path, to: Path, run: dict[str, Any], tag: str = "") -> str:
    """`<split>_keypoints.npz` as the older pipeline's prepare_model_input makes them."""
    from phoenix_keypoints.extract.families.holistic.legacy import write_legacy_npz

    _no_tag(tag)
    per = write_legacy_npz(keypoints, to, run["source_path"])
    shown = ", ".join(f"{s}_keypoints.npz {n}" for s, n in per.items())
    return f"legacy npz: {to}/ ({shown or 'no split has a frame with anything detected'})"


def islr(keypoints: Path, to: Path, note: Callable[[str], None]) -> str:
    """One Kaggle isolated-sign parquet per video; says (`note`) what that layout leaves out."""
    from phoenix_keypoints.extract.families.holistic.islr import write_islr_files
    from phoenix_keypoints.extract.families.holistic.points import PARTS, file_layout

    n = write_islr_files(keypoints, to)
    if file_layout(keypoints)["face"][0] > PARTS["face"][0]:
        note("the run's face is refined (478 points): the islr layout holds face points 0-467 "
             "only, so the 10 iris points (468-477) were left out")
    note("the islr layout has no pose visibility and no pose_world: those were left out")
    return f"islr: {to} ({n} videos)"


EXPORTS = {"islr": islr, "legacy-pkl": legacy_pkl, "legacy-npz": legacy_npz}
ONE_FILE_EXPORTS = ("legacy-pkl",)  # those whose --to is the file (the others: a folder)
