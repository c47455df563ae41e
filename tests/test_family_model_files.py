"""A family's model files, as the tool's shared model-file helpers treat them, for a plugin
(examples/openpose25, installed as pip leaves a plugin: a dist-info naming its entry point) and
a built-in ONNX family (wholebody, on tests/tiny_onnx.py's tiny models).

Moved, they are followed by default (issue 55 item 1): the plugin has no `moved_files` hook of
its own. The model's folder is renamed, so the recorded path is gone and `verify` says how to
record where it is now; the same `run` naming the new path then records it, in run.json and
keypoints.parquet's metadata, on a resumed run (work left) and on a finished one (nothing
recomputed: the rows and parts are the same bytes), and `verify` passes.

Refused, they are refused in the family's own words (issue 55 item 5): the helpers' neutral
wording and the advice the family passes, never the whole-body family's (rtmlib's downloads,
docs/wholebody.md) to a plugin's users.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import REPO, assert_no_traceback, run_cli
from test_example_plugin import body25_model
from tiny_onnx import looping, tiny_models

from phoenix_keypoints.extract.keypoints.estimator import ModelFileError
from phoenix_keypoints.extract.keypoints.filemeta import FILE_KEY
from phoenix_keypoints.extract.keypoints.onnx_files import check_model_file

FAMILIES = ("openpose25", "wholebody")


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """examples/openpose25 installed as pip installs a plugin: its package on the path and a
    dist-info naming its entry point (what its wheel holds)."""
    site = tmp_path_factory.mktemp("op25-site")
    info = site / "phoenix_keypoints_openpose25-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: phoenix-keypoints-openpose25\n"
                                   "Version: 0.1.0\n")
    (info / "entry_points.txt").write_text("[phoenix_keypoints.families]\n"
                                           "openpose25 = phoenix_openpose25:OpenPose25\n")
    src = REPO / "examples" / "openpose25" / "src"
    return {"PYTHONPATH": os.pathsep.join(map(str, (site, src, REPO)))}


def model_flags(folder: Path, name: str) -> list[str]:
    """The family's flags naming its model files in `folder` (written there once)."""
    folder.mkdir(exist_ok=True)
    if name == "openpose25":
        model = folder / "body25.onnx"
        return ["--estimator", name, "--op25-model",
                str(model if model.exists() else body25_model(model))]
    models = tiny_models(folder)
    return ["--estimator", name, "--detector", str(models["detector"]), "--pose-model",
            str(models["pose"])]


def ok(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert_no_traceback(proc)
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stderr}"
    return proc


def file_record(out: Path) -> dict:
    return json.loads(pq.read_schema(out / "keypoints.parquet").metadata[FILE_KEY])


def moved(record: dict, old: Path, new: Path) -> dict:
    """The record with every path under `old` under `new` instead."""
    return json.loads(json.dumps(record).replace(str(old), str(new)))


@pytest.mark.parametrize("finished", [False, True], ids=["resumed", "finished"])
@pytest.mark.parametrize("name", FAMILIES)
def test_a_run_follows_its_model_files_where_they_moved(name: str, finished: bool,
                                                        plugin_env: dict[str, str],
                                                        sample_root: Path, tmp_path: Path) -> None:
    old, new, out = tmp_path / "old", tmp_path / "new", tmp_path / "run"
    args = ["run", "--dataset", sample_root, "--out", out, "--videos", "coffee-1,hopper-2",
            "--chunk-frames", "8"]
    ok(run_cli([*args, *model_flags(old, name)], plugin_env), "run")
    planned = json.loads((out / "run.json").read_text())["options"][name]
    meta, rows = file_record(out), pq.read_table(out / "keypoints.parquet")
    parts = sorted((out / "parts").glob("chunk-*.parquet"))
    assert len(parts) > 1 and str(old) in json.dumps(meta)
    old.rename(new)

    # verify: the recorded model is gone, and it says how to record where it is now
    proc = run_cli(["verify", "--out", out], plugin_env)
    assert_no_traceback(proc)
    assert proc.returncode == 1, proc.stderr
    assert f"moved: run this run's `phoenix-keypoints run --out {out}` command again" in \
        proc.stderr, proc.stderr

    if not finished:  # work left: the last chunk to extract again, then the merge
        (out / "keypoints.parquet").unlink()
        parts.pop().unlink()
    kept = {p: p.read_bytes() for p in parts}
    proc = ok(run_cli([*args, *model_flags(new, name)], plugin_env), "the run, models moved")
    assert "the model file(s) moved" in proc.stderr, proc.stderr
    assert ("complete:" in proc.stdout) == finished, proc.stdout
    assert {p: p.read_bytes() for p in parts} == kept  # no kept part made again

    record = json.loads((out / "run.json").read_text())
    assert record["options"][name] == moved(planned, old, new)
    assert len(record["model_moves"]) == (1 if name == "openpose25" else 2)
    assert all(f"{old}/" in line and f"-> {new}/" in line for line in record["model_moves"])
    assert file_record(out) == moved(meta, old, new)
    after = pq.read_table(out / "keypoints.parquet")
    assert after.replace_schema_metadata(None).equals(rows.replace_schema_metadata(None))
    points = json.loads((out / "tensors" / "points.json").read_text())
    assert points["source"]["bytes"] == (out / "keypoints.parquet").stat().st_size

    ok(run_cli(["verify", "--out", out], plugin_env), "verify after the move was recorded")
    again = ok(run_cli([*args, *model_flags(new, name)], plugin_env), "the same run again")
    assert "complete:" in again.stdout and "moved" not in again.stderr, again.stderr


BUILT_IN = ("rtmlib", "wholebody")  # the whole-body family's words


def bad_models(folder: Path) -> dict[str, Path]:
    """A model file each shared check refuses: text (the walk of its protobuf), a FIFO (no
    regular file) and a BODY_25 graph with a Loop whose trips come from the pixels."""
    folder.mkdir()
    (folder / "text.onnx").write_text("not a model")
    os.mkfifo(folder / "fifo.onnx")
    loop = looping(body25_model(folder / "body25.onnx"), folder / "loop.onnx", "points", "data")
    return {"text": folder / "text.onnx", "fifo": folder / "fifo.onnx", "loop": loop}


@pytest.mark.parametrize("case", ["text", "fifo", "loop"])
def test_a_plugins_bad_model_file_is_refused_in_its_own_words(case: str, plugin_env: dict[str, str],
                                                              sample_root: Path,
                                                              tmp_path: Path) -> None:
    """The plugin's refusal names the file and the fault, with its own advice after it; the
    whole-body family's same refusal keeps its own (rtmlib's published models)."""
    model = bad_models(tmp_path / "models")[case]
    said = {"text": "not an ONNX model", "fifo": "a FIFO, not a model file",
            "loop": "a Loop whose trip count"}[case]
    base = ["run", "--dataset", sample_root, "--out", tmp_path / "run", "--videos", "coffee-1"]
    proc = run_cli([*base, "--estimator", "openpose25", "--op25-model", model], plugin_env)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"--op25-model {model}: " in proc.stderr and said in proc.stderr, proc.stderr
    assert "(this family runs OpenPose's BODY_25 net exported to ONNX: input [N, 3, H, W], " \
        "output [N, 25, 3])." in proc.stderr, proc.stderr
    assert not any(word in proc.stderr for word in BUILT_IN), proc.stderr
    if case == "loop":
        return  # the whole-body family reads a BODY_25 graph as no model of its kinds first
    proc = run_cli([*base, "--estimator", "wholebody", "--pose-model", model])
    assert proc.returncode == 2 and f"--pose-model {model}: {said}" in proc.stderr, proc.stderr
    assert "docs/wholebody.md says where rtmlib's published models are" in proc.stderr


def test_without_advice_the_shared_checks_say_the_fault_alone(tmp_path: Path) -> None:
    """A family that passes no advice gets the neutral wording: the file, the fault, what to
    pass, and nothing of another family."""
    model = bad_models(tmp_path / "models")["fifo"]
    with pytest.raises(ModelFileError) as refused:
        check_model_file(model, "--my-model")
    assert str(refused.value) == (f"--my-model {model}: a FIFO, not a model file. Pass the .onnx "
                                  "file of the model.")


def body25_outputs(src: Path, out: Path, outputs: list[tuple[str, list]]) -> Path:
    """The tiny BODY_25 model of `src` answering `outputs` instead ((tensor, declared shape)
    each: its points "points" [batch, 25, 3], their x, y "xyn" [batch, 25, 2], scores "score")."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(src))
    del model.graph.output[:]
    model.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                              for name, shape in outputs)
    onnx.save(model, str(out))
    return out


@pytest.mark.parametrize("case", ["xy-only", "two-outputs"])
def test_a_model_declaring_another_output_is_refused_before_any_frame(
        case: str, plugin_env: dict[str, str], sample_root: Path, tmp_path: Path) -> None:
    """The plugin declares its model's output [N, 25, 3]; a file declaring [batch, 25, 2], or a
    second output, is refused by `run` naming the file, the output, its shape and the one
    expected, before a run is planned (it was found in every frame's answer after a batch)."""
    body = body25_model(tmp_path / "body25.onnx")
    outputs, said = {
        "xy-only": ([("xyn", ["batch", 25, 2])],
                    "its output 0 ('xyn') is declared [batch, 25, 2], not [N, 25, 3] as this "
                    "family's model answers: refused before any frame"),
        "two-outputs": ([("points", ["batch", 25, 3]), ("score", ["batch", 25, 1])],
                        "2 outputs ('points' [batch, 25, 3], 'score' [batch, 25, 1]); this "
                        "family runs a model of 1 ([N, 25, 3])"),
    }[case]
    model = body25_outputs(body, tmp_path / f"{case}.onnx", outputs)
    out = tmp_path / "run"
    proc = run_cli(["run", "--dataset", sample_root, "--out", out, "--videos", "coffee-1",
                    "--estimator", "openpose25", "--op25-model", model], plugin_env)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert f"--op25-model {model}: {said}" in proc.stderr, proc.stderr
    assert not (out / "run.json").exists() and not list(out.glob("parts/*.parquet"))


def test_an_output_size_the_file_leaves_open_is_left_to_the_answers(tmp_path: Path) -> None:
    """A size the graph names instead of fixing is not known before the model answers: the
    load's check passes it (each answer is checked), and still refuses a size the file fixes."""
    from phoenix_keypoints.extract.keypoints.environ import telemetry_off

    telemetry_off()  # as the tool does before onnxruntime loads in its processes
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from phoenix_keypoints.extract.keypoints.model_outputs import check_outputs

    shape = ["batch", "p", 3]  # its points a name: onnxruntime cannot infer them either
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["points"])], "open",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("points", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    open_points = tmp_path / "open.onnx"
    onnx.save(model, str(open_points))
    session = ort.InferenceSession(str(open_points), providers=["CPUExecutionProvider"])
    check_outputs(session, [("N", 25, 3)], "--m", open_points)
    with pytest.raises(ModelFileError, match=r"declared \[batch, p, 3\], not \[N, 25, 2\]"):
        check_outputs(session, [("N", 25, 2)], "--m", open_points)


def test_the_guide_names_each_model_file_helper_with_its_module_and_signature() -> None:
    """docs/families.md's table of model-file helpers: each row imports from the module it
    names, with the parameters and defaults the function has (issue 55 item 6)."""
    import importlib
    import inspect
    import re

    guide = (REPO / "docs" / "families.md").read_text()
    table = guide.split("### The model-file helpers", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\w+)\.(\w+)\(([^)]*)\)` \|", table, re.M)
    assert len(rows) == 9, rows
    for module, name, said in rows:
        fn = getattr(importlib.import_module(f"phoenix_keypoints.extract.keypoints.{module}"), name)
        params = inspect.signature(fn).parameters.values()
        real = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                         for p in params)
        assert said.replace('""', "''") == real, f"{module}.{name}({said}) is {name}({real})"
