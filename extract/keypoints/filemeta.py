"""What keypoints.parquet says about itself in its own Parquet key-value metadata, so that a copy
taken away from its run folder still names the tool, versions, the family's settings (its
file_record), dataset and point layout it was made with. Read back with pyarrow alone:

    json.loads(pq.read_schema(path).metadata[b"phoenix_keypoints.file"])

Only what decides the numbers goes in (no times, no worker counts, no plan cuts), so the file stays
the same bytes however many workers made it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from phoenix_keypoints.extract.keypoints.estimator import estimator_name, family

FILE_KEY = b"phoenix_keypoints.file"
# 1: landmark lists of PARTS, no file metadata. 2: + pose_world, a 478-point face when refined,
# and this metadata (landmark columns are still Parquet lists: see docs/outputs.md).
SCHEMA_VERSION = 2


def _made_by(versions: dict[str, str]) -> dict[str, Any]:
    """What every record starts with: the schema, the tool and the versions it ran with."""
    return {"schema_version": SCHEMA_VERSION, "tool": "phoenix-keypoints",
            "tool_version": versions.get("phoenix-keypoints", "unknown"),
            "versions": {k: versions[k] for k in sorted(versions)}}


def file_metadata(versions: dict[str, str], recorded: dict[str, Any],
                  dataset_fingerprint: str, settings: dict[str, Any] | None = None,
                  execution: list[dict[str, Any]] | None = None) -> dict[bytes, bytes]:
    """The key-value metadata merge writes into keypoints.parquet: what every record starts with,
    then what the run's family says of itself (its `file_record`), and how the merged parts'
    values were computed (`execution`: each record of extract/keypoints/execution.py once, as
    run.json's merge record lists them; a family that records none has no key).

    `recorded`: the default family's options as run.json records them; `settings`: the run's
    estimator settings (None: the default family's, the record its files have always had)."""
    record = {**_made_by(versions), "dataset_fingerprint": dataset_fingerprint,
              **family(estimator_name(settings)).file_record(settings, recorded),
              **({"execution": execution} if execution else {})}
    return {FILE_KEY: json.dumps(record, sort_keys=True).encode()}


def read_file_metadata(path: Path) -> dict[str, Any] | None:
    """The record of a keypoints file, or None for one written before it existed (version 1)."""
    raw = (pq.read_schema(path).metadata or {}).get(FILE_KEY)
    return json.loads(raw) if raw else None


def read_parquet(path: Path | str, columns: list[str] | None = None) -> Any:
    """One Parquet file as a table, as pq.read_table reads it, without pyarrow.dataset: importing
    that imports pandas too (~0.4 s of CPU, 0.8 s on a loaded host) in a process that never needs
    it (a run's coordinator plans and merges with pyarrow alone; issue 53 item 11)."""
    with pq.ParquetFile(path) as f:
        return f.read(columns=columns)
