"""How a run's parts were computed: the one owner of that rule (issue 56 item 3).

A part's values depend on two records: the versions of what computes them (extract/keypoints/
versions.py) and, for a batching family, the execution record (extract/keypoints/execution.py:
device, GPU, provider and its options, batch shape). One file must hold one computation, so every
place that asks "may this be computed so?" asks a `MadeUnder`, not the two records itself:

- a resume takes the committed parts' --device and --batch-size where not given
  (`MadeUnder.of_run` read from part footers, `resumed_with`; jobs/runner.py `_made_under`);
- a chunk's task is bound to the committed parts' record, or to the first ready worker's
  (jobs/run/extraction.py);
- a worker refuses a task it would compute otherwise, before its first frame, in words
  (`refusal`; jobs/schedule/worker.py);
- the resume scan binds the run to its committed parts (`binding`, `of_part`; jobs/run/todo.py).

Why one object: these four were decided apart and had to agree (a resume that took the parts'
device but a worker that compared another key would refuse every chunk, or worse accept one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from phoenix_keypoints.extract.keypoints import execution as execution_record
from phoenix_keypoints.extract.keypoints.versions import differences, named, pip_hint
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.parts import PartInfo, read_part_info
from phoenix_keypoints.jobs.rundir.runinfo import RunInfo


@dataclass(frozen=True)
class MadeUnder:
    """What a part's values were (or a worker's would be) computed under. An empty record (a part
    written before parts recorded it, a family that does not batch) binds nothing."""

    versions: Mapping[str, str] = field(default_factory=dict)
    execution: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of_worker(cls, versions: Mapping[str, str], execution: Mapping[str, Any] | None
                  ) -> MadeUnder:
        """How a worker (or a task that binds one) computes: its versions and execution record."""
        return cls(dict(versions), dict(execution or {}))

    @classmethod
    def of_part(cls, part: PartInfo, recorded: Mapping[str, str] | None = None) -> MadeUnder:
        """What a committed part's footer says it was made under; a part older than the versions
        in footers was made under the run's `recorded` ones (run.json)."""
        return cls(dict(part.versions or recorded or {}), dict(part.execution))

    @classmethod
    def of_run(cls, rd: RunDir, info: RunInfo) -> MadeUnder:
        """How the run's committed parts computed their values: the run's recorded versions and
        the execution record of the first part of this run that has one ({} where none does).
        Read from part footers, so a coordinator killed outright still tells its resume."""
        for path in sorted(rd.parts_dir.glob("chunk-*.parquet")):
            try:
                part, fingerprint = read_part_info(path)
            except ValueError:
                continue
            if part.execution and fingerprint == info.fingerprint:
                return cls(info.value_versions(), dict(part.execution))
        return cls(info.value_versions(), {})

    @staticmethod
    def binding(parts: Iterable[PartInfo]) -> dict[str, Any]:
        """The execution record committed parts bind a run to: the first part's that has one."""
        return execution_record.binding([p.execution for p in parts])

    def version_differences(self, now: MadeUnder) -> dict[str, tuple[str, str]]:
        """{name: (made, now)} of the versions that differ (extract.keypoints.versions)."""
        return differences(dict(self.versions), dict(now.versions))

    def execution_differences(self, now: MadeUnder) -> dict[str, tuple[Any, Any]]:
        """{key: (made, now)} of the execution record that would give other values (on the CPU
        the batch shape does not bind: extract.keypoints.execution)."""
        return execution_record.differences(dict(self.execution), dict(now.execution))

    def differs(self, now: MadeUnder) -> str | None:
        """Why values computed under `now` would not be this computation's, in words; None where
        they would be."""
        diffs = self.version_differences(now)
        if diffs:
            return f"other versions ({named(diffs, 'made', 'now')})"
        keys = self.execution_differences(now)
        if keys:
            return (f"{', '.join(keys)} differ: made on {self.said()}, now on "
                    f"{execution_record.said(dict(now.execution))}")
        return None

    def refusal(self, now: MadeUnder, who: str) -> str:
        """Why `who` (a worker computing under `now`) may not extract chunks made under this, with
        how to go on; '' where it may. The run stops rather than going on without it: the
        keypoints stay one computation's and the user learns the node differs."""
        diffs = self.version_differences(now)
        if diffs:
            return (f"{who} has other versions of what the keypoints depend on than the run "
                    f"({named(diffs, 'in the run', 'here')}); no chunk is extracted under them, so "
                    "the file holds one pipeline's keypoints. Install the run's versions on that "
                    f"node{pip_hint(diffs)} or start the workers only where they are installed, "
                    "then run the same command again to resume.")
        keys = self.execution_differences(now)
        if not keys:
            return ""
        return (f"{who} would compute the keypoints otherwise than the run ({', '.join(keys)} "
                f"differ): the run's are made on {self.said()}, this worker runs on "
                f"{execution_record.said(dict(now.execution))}; no chunk is extracted so, since "
                f"the values depend on it. Resume with `{self.flags()}` where that runs (the run's "
                "own are taken when --device and --batch-size are not given), or make the whole "
                "run again under these with --fresh, or give another --out.")

    def resumed_with(self, device: str | None, batch_size: int | None
                     ) -> tuple[str | None, int | None]:
        """The --device and --batch-size a resume computes with: those given, else the parts'
        (so it computes what they were computed under, whatever this node's defaults)."""
        if not self.execution:
            return device, batch_size
        made = self.execution
        shape = made.get("batch_shape") or {}
        batch = batch_size or (max(shape.values()) if shape and max(shape.values()) > 1 else None)
        return (device if device not in (None, "auto") else made.get("device")), batch

    def said(self) -> str:
        """The execution record in words ('cuda (NVIDIA H200; ...), calls of 8 frames')."""
        return execution_record.said(dict(self.execution))

    def flags(self) -> str:
        """The options that compute under this record again ('--device cuda --batch-size 8')."""
        return execution_record.flags(dict(self.execution))
