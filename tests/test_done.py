"""Done (jobs/run/done.py), the one owner of the resume rule: which chunks of a run are done and
why the others are not, shown on the object and on a finished run's folder without a process."""

from __future__ import annotations

import shutil
from pathlib import Path

from phoenix_keypoints.jobs.run.done import Done, PartsState, scan_parts
from phoenix_keypoints.jobs.rundir.folder import RunDir
from phoenix_keypoints.jobs.rundir.parts import PartInfo


def _state() -> Done:
    state = Done({0: {"a": 2}, 1: {"b": 3}, 2: {"c": 1}})
    state.done[0] = PartInfo.of_rows(0, ["a", "a"], ["ok", "ok"], {})
    state.done[1] = PartInfo.of_rows(1, [], [], {"b": "unreadable frames"})
    state.rejected[2] = "written by another run (other dataset or options)"
    return state


def test_a_chunk_not_done_says_why() -> None:
    state = _state()
    assert state.why_not(0) == ""
    assert state.why_not(2) == "written by another run (other dataset or options)"
    assert Done({3: {"d": 1}}).why_not(3) == "no part committed"
    assert state.missing == [2] and PartsState is Done


def test_what_is_left_in_order_and_what_retry_failed_redoes() -> None:
    state = _state()
    assert state.todo([2, 1, 0]) == [2]
    assert state.retried(False) == set() and state.retried(True) == {1}
    assert state.todo([2, 1, 0], state.retried(True)) == [2, 1]


def test_a_finished_run_is_merged_until_a_part_goes(clean_wholebody_run: Path, tmp_path: Path
                                                    ) -> None:
    out = tmp_path / "run"
    shutil.copytree(clean_wholebody_run, out)
    rd = RunDir(out)
    info, plan = rd.load(), rd.load_plan()
    state = scan_parts(rd, info, plan, move_bad=False, check_frames=True)
    assert state.done and not state.missing and Done.merged(rd, info)
    first = min(state.chunks)
    assert Done.trusted(rd, info.fingerprint, first, state.chunks[first])
    assert not Done.trusted(rd, "another run", first, state.chunks[first])
    rd.part_path(first).unlink()
    again = Done.scan(rd, info, plan, move_bad=False)
    assert again.missing == [first] and again.why_not(first) == "no part committed"
    assert not Done.trusted(rd, info.fingerprint, first, state.chunks[first])
    assert not Done.merged(rd, info)
