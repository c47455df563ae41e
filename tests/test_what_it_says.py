"""What the tool says and records is so (issue 48 item 6, the small ones): an article fit for the
name after it ("an openpose25 run"), `--workers`' help without any family's words, the `--fresh`
hint naming the input as the user gave it (an archive, not `--dataset PHOENIX_ROOT`), `export
--to` taken as the file or the folder each format writes (never a folder named `X.pkl`), and
run.json recording only the run's own family's settings (with the fingerprint it had before).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import assert_no_traceback, run_cli
from kinds import KINDS
from tiny_onnx import tiny_models

ARCHIVE = next(k for k in KINDS if k.id == "archive-top.tar.gz")


@pytest.mark.parametrize("name,said", [
    ("openpose25", "an openpose25"), ("wholebody", "a wholebody"), ("holistic", "a holistic"),
    ("xz", "an xz"), ("gzip", "a gzip"), ("7z", "a 7z"), ("int", "an int"), ("str", "a str"),
    ("list", "a list"),
    ("8x6", "an 8x6"), ("11x4", "an 11x4"), ("1100", "a 1100"), ("18000", "an 18000"),
    ("RTMPose", "an RTMPose"), ("unisign", "a unisign"), ("hour", "an hour"), ("mp4", "an mp4")])
def test_the_article_fits_how_the_name_is_said(name, said):
    from phoenix_keypoints.extract.keypoints.words import a

    assert a(name) == said


def test_a_refusal_names_a_plugin_family_with_its_article(tmp_path):
    """The one refusal of an export a family lacks, for a family named with a vowel first."""
    from phoenix_keypoints.extract.families.wholebody.declaration import DECLARATION
    from phoenix_keypoints.extract.keypoints.estimator import export_refused

    decl = replace(DECLARATION, name="openpose25", title="OpenPose 25 points", exports=("pose",))
    why = export_refused(decl, "unisign-pkl", tmp_path)
    assert f"{tmp_path} is an openpose25 run (OpenPose 25 points)" in why, why


def test_workers_help_names_no_family():
    from phoenix_keypoints.extract.keypoints.estimator import family, names

    proc = run_cli(["run", "--help"], env=None)
    text = " ".join(proc.stdout.split())
    at = text.index("--workers N worker")
    said = text[at:text.index("--num-gpus", at)]
    assert "worker processes" in said
    for name in names():
        fam = family(name)
        for words in (name, fam.ABOUT, fam.declaration(None).title, "MediaPipe",
                      "whole-body", "ONNX"):
            assert not words or words not in said, (words, said)


@pytest.fixture(scope="module")
def archive_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A whole-body run (tiny models) of a PHOENIX tree inside a .tar.gz, given as the archive."""
    folder = tmp_path_factory.mktemp("said")
    models = tiny_models(folder / "models")
    out = folder / "run"
    proc = run_cli(["run", "--dataset", ARCHIVE.build(folder / "in"), "--out", out, "--estimator",
                    "wholebody", "--detector", models["detector"], "--pose-model", models["pose"]])
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_fresh_hint_names_the_archive_as_given(archive_run):
    given = json.loads((archive_run / "run.json").read_text())["dataset"]["given"]
    assert given.endswith(".tar.gz")
    proc = run_cli(["run", "--out", archive_run, "--estimator", "holistic"])  # no --dataset typed
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"--fresh --dataset {shlex.quote(given)}`" in proc.stderr, proc.stderr
    assert "PHOENIX_ROOT" not in proc.stderr


def test_run_json_records_only_its_own_familys_settings(archive_run):
    """No empty `holistic` beside a whole-body run's settings; its fingerprint is the one the
    earlier record (with that empty key, as 67bac1c wrote run.json) gave, so such runs resume."""
    from phoenix_keypoints.jobs.rundir.folder import RunDir

    raw = json.loads((archive_run / "run.json").read_text())
    assert raw["options"]["estimator"] == "wholebody" and raw["options"]["wholebody"]
    assert "holistic" not in raw["options"], raw["options"]
    earlier = {**{k: v for k, v in raw["options"].items()}, "holistic": {}}
    blob = json.dumps({"dataset": raw["dataset"]["fingerprint"], "options": earlier,
                       "cuts": raw["plan"]["cuts"]}, sort_keys=True)
    assert raw["fingerprint"] == hashlib.sha256(blob.encode()).hexdigest()
    raw["options"]["holistic"] = {}  # a run.json as the earlier version wrote it
    (archive_run / "run.json").write_text(json.dumps(raw))
    info = RunDir(archive_run).load()
    assert info.options.estimator == "wholebody" and info.fingerprint == raw["fingerprint"]
    assert run_cli(["verify", "--out", archive_run]).returncode == 0


# (format, --to to make: "dir", "file" or a name, the words of its refusal)
WRONG_TO = {
    "wholebody": [("unisign-pkl", "X.pkl", "names a file (.pkl)"),
                  ("twostream-pkl", "dir", "is a folder"),
                  ("pose", "file", "is a file"), ("pose", "X.pose", "names a file (.pose)")],
    "holistic": [("pkl", "dir", "is a folder"), ("legacy-pkl", "dir", "is a folder"),
                 ("legacy-npz", "X.npz", "names a file (.npz)"),
                 ("islr", "file", "is a file")],
}


def _target(tmp_path: Path, kind: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    to = tmp_path / {"dir": "somewhere", "file": "made.txt"}.get(kind, kind)
    if kind == "dir":
        to.mkdir()
    elif kind == "file":
        to.write_text("mine\n")
    return to


@pytest.mark.parametrize("fam", list(WRONG_TO))
def test_export_to_is_the_file_or_the_folder_the_format_writes(fam, archive_run, run_copy,
                                                                tmp_path):
    """Each --to that does not fit what the format writes is refused (exit 2) saying what to give,
    nothing written; the format's own kind of --to is taken (unisign-pkl: the folder X)."""
    out = archive_run if fam == "wholebody" else run_copy
    for fmt, kind, words in WRONG_TO[fam]:
        to = _target(tmp_path / fmt, kind)
        before = sorted(to.parent.rglob("*"))
        proc = run_cli(["export", "--out", out, "--format", fmt, "--to", to])
        assert_no_traceback(proc)
        assert proc.returncode == 2 and words in proc.stderr, (fmt, kind, proc.stderr)
        assert f"--format {fmt}" in proc.stderr
        assert sorted(to.parent.rglob("*")) == before, fmt
    if fam == "wholebody":
        to = tmp_path / "uni" / "X"
        assert run_cli(["export", "--out", out, "--format", "unisign-pkl", "--to", to]).returncode == 0
        assert to.is_dir() and any(to.rglob("*.pkl"))
