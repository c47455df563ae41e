"""The command line's promises: worker pinning, live status, clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_no_traceback, popen_cli, progress, run_cli, wait_for

from phoenix_keypoints.jobs.schedule.devices import visible_gpus, worker_slots


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def _allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list")


def test_slots_follow_gpus_and_cpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert visible_gpus() == ["3", "5"]
    slots = worker_slots(None, 2)
    assert [s.gpu for s in slots] == ["3", "5", "3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    slots = worker_slots(None, None)
    assert all(s.gpu == "" for s in slots) and len(slots) >= 1
    assert worker_slots(0, 3)[2].gpu == ""


def test_workers_pinned_and_status_live(sample_root: Path, tmp_path: Path):
    """Real workers: CUDA_VISIBLE_DEVICES and CPU affinity as planned; status works meanwhile."""
    out = tmp_path / "run"
    proc = popen_cli(["run", "--dataset", sample_root, "--out", out, "--chunk-frames", "20",
                      "--num-gpus", "2", "--workers-per-gpu", "1"],
                     env={"PHOENIX_KEYPOINTS_FAULTS": "frame-delay=0.1"})
    def two_workers_working() -> list[dict]:
        beat = progress(out)
        workers = [w for w in beat.get("workers", []) if w["pid"]]
        return workers if len(workers) == 2 and beat["frames_done"] > 0 else []

    try:
        workers = wait_for(two_workers_working, 120, "two workers reporting frames", proc)
        for w in workers:
            assert _environ(w["pid"])["CUDA_VISIBLE_DEVICES"] == str(w["slot"] % 2)
            assert _allowed_cpus(w["pid"]) == str(w["cpus"][0])
        status = run_cli(["status", "--out", out])
        assert status.returncode == 0, status.stderr
        assert "running:  pid" in status.stdout and "frames/s" in status.stdout
    finally:
        _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    status = run_cli(["status", "--out", out])
    assert "chunks:   5/5 committed" in status.stdout
    assert "merged:   82 rows" in status.stdout


def test_refuses_model_that_would_download(sample_root: Path, tmp_path: Path):
    proc = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "r",
                    "--model-complexity", "2"])
    assert proc.returncode == 2
    assert "pose_landmark_heavy.tflite" in proc.stderr and "--model-complexity 1" in proc.stderr
    assert_no_traceback(proc)
    assert not (tmp_path / "r" / "run.json").exists()


def test_status_and_merge_without_run(tmp_path: Path):
    for cmd in ("status", "merge"):
        proc = run_cli([cmd, "--out", tmp_path / "nothing"])
        assert proc.returncode == 2
        assert "no run" in proc.stderr and "phoenix-keypoints run" in proc.stderr
        assert_no_traceback(proc)


@pytest.mark.parametrize("flag,value", [("--batch-size", "abc"), ("--workers", "1.5"),
                                        ("--num-gpus", "two"), ("--chunk-frames", ""),
                                        ("--workers", " 5"), ("--workers", "+1")])
def test_a_number_option_given_no_number_says_so_in_words(flag: str, value: str, tmp_path: Path):
    """argparse names the function that parsed a value when it raises ValueError: the user reads
    what is wrong instead."""
    proc = run_cli(["run", "--out", tmp_path / "r", flag, value])
    assert proc.returncode == 2
    assert f"argument {flag}" in proc.stderr, proc.stderr
    assert f"must be a whole number, not {value!r}" in proc.stderr, proc.stderr
    assert "invalid" not in proc.stderr and "_positive" not in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()


def _numeric_options() -> list[tuple[str, str, object]]:
    """(command, flag, type) of every option of every command whose type reads 1 or 3 as a number:
    the whole parser walked, subcommands of subcommands too, so a new one is in the test."""
    import argparse
    import contextlib

    from phoenix_keypoints.jobs.cli import build_parser

    out, parsers = [], [("", build_parser())]
    while parsers:
        name, parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += [(f"{name} {n}".strip(), p) for n, p in action.choices.items()]
            elif action.option_strings and callable(action.type):
                read = []
                for probe in ("1", "3"):
                    with contextlib.suppress(argparse.ArgumentTypeError, ValueError, TypeError):
                        read.append(action.type(probe))
                if any(isinstance(x, (int, float)) and not isinstance(x, bool) for x in read):
                    out.append((name, action.option_strings[0], action.type))
    return out


NOT_ASCII_NUMBERS = ["٣", "²", "３", "1_000", "nan", "inf", "١.٥", "3\u200b", "\u00a03", "", "abc",
                     " 5", "5 ", "\t5", "+1", "+0.5", "-0"]  # no sign, no space (issue 52 item 5)


def test_every_numeric_option_reads_ascii_digits_only_and_says_so_in_words():
    """`--det-every ٣` was read as 3 and `--det-every ²` said "invalid _every value" (issue 46
    item 7); float options took `nan` and `١.٥`, and `--workers ' 5'` and `+1` were read (issue 52):
    every numeric option of every command now reads ASCII digits and (a number) a point and an
    exponent, no sign and no space, and refuses the rest
    with an ArgumentTypeError in words (argparse prints a ValueError as the function's name)."""
    import argparse

    found = _numeric_options()
    for command, flag, kind in found:
        for value in NOT_ASCII_NUMBERS:
            with pytest.raises(argparse.ArgumentTypeError) as e:
                kind(value)
            assert str(e.value).startswith("must be "), (command, flag, value, str(e.value))
    assert {"--det-every", "--batch-size", "--workers", "--fps", "--tolerance", "--max-gap",
            "--model-deadline", "--model-memory", "--min-detection-confidence",
            "--model-complexity", "--min-face-rate", "--max-hand-gap"} <= {f for _, f, _ in found}


@pytest.mark.parametrize("value, said", [
    ("٣", "argument --det-every: must be a whole number of frames, not '٣'"),
    ("²", "argument --det-every: must be a whole number of frames, not '²'"),
    ("0", "argument --det-every: must be >= 1, not 0"),
])
def test_det_every_of_no_ascii_number_is_refused_in_words(value: str, said: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture):
    from phoenix_keypoints.jobs.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["run", "--out", str(tmp_path / "r"), "--det-every", value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "_every" not in err and "invalid" not in err, err


def test_sample_command(tmp_path: Path):
    proc = run_cli(["sample", "--out", tmp_path])
    assert proc.returncode == 0
    root = Path(proc.stdout.strip())
    assert (root / "annotations" / "manual" / "PHOENIX-2014-T.train.corpus.csv").is_file()


def test_export_help_words_each_format_as_the_families_that_take_it_do():
    """`export --format`'s help reads each family's words for its formats (EXPORT_HELP) and says
    which families' runs a format takes where not all do; it named the whole-body formats in
    the command line's own text (issue 38)."""
    proc = run_cli(["export", "--help"], env={"COLUMNS": "1000"})  # one line: no wrap at a -
    said = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stderr
    for words in ("pose: .pose files;", "legacy-pkl: the older script's pkl (what run --output_path "
                  "writes) (holistic runs)", "twostream-pkl: TwoStream-SLR's keypoint_file "
                  "(wholebody runs)", "unisign-pkl: Uni-Sign's pose folder (wholebody runs)"):
        assert words in said, said


@pytest.mark.parametrize("command", ["run", "slurm"])
def test_run_and_slurm_help_come_in_sections(command: str):
    """`run` (44 options) and `slurm` (43) printed one flat list (issue 56 item 1): each option now
    sits in one section of --help (what to read, what to select, where it goes, the family and each
    family's own, workers and devices, model limits, resume, nodes or the sbatch array), none left
    in the catch-all "options" but --help itself, and the sections print in that order."""
    import argparse

    from phoenix_keypoints.jobs.cli import SECTIONS, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[command]
    groups = {g.title: g for g in parser._action_groups}
    flat = [a.option_strings[0] for a in groups["options"]._group_actions]
    assert flat == ["-h"], f"{command}: options outside every section: {flat}"
    sectioned = [a for t, g in groups.items() if t not in ("options", "positional arguments")
                 for a in g._group_actions]
    assert len(sectioned) == len(parser._actions) - 1  # each option once, -h aside
    assert {"--estimator", "--batch-size", "--model-deadline", "--frozen"} <= {
        a.option_strings[0] for a in sectioned}
    text = parser.format_help()
    titles = [t for t in SECTIONS if t in groups]
    assert [text.index(f"\n{t}:\n") for t in titles] == sorted(text.index(f"\n{t}:\n") for t in titles)
    assert "\nholistic (--estimator holistic):\n" in text and "--model-complexity" in text.split(
        "\nholistic (--estimator holistic):\n")[1].split("\n\n")[0]
