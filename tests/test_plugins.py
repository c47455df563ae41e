"""Installed families (plugins) are loaded only where a command names them (issue 46 item 5), and
are held to the family contract when they are (issue 48 item 3).

Three broken distributions are installed the way pip installs any (a dist-info with an entry
point of group phoenix_keypoints.families, its module on the path): `bad-plugin-raises` 2.3, whose
module raises at import (with a terminal escape and a second line in its message),
`plugin-without-declaration` 0.9, whose Family subclass lacks every required method but one, and
`plugin-as-module` 1.4, a family written as a module (as plugins were before a family was a
class: issue 55 item 1), refused naming the base class. Each module touches a
marker file when it is imported, so a test sees whether a command imported it. Every other
command goes on as if they were absent; the one that needs them says which distribution, which
version and what went wrong, in one escaped line, and exits 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_no_traceback, run_cli

from phoenix_keypoints.extract.keypoints import contract, estimator
from phoenix_keypoints.extract.keypoints.estimator import Declaration

MARKER = "import pathlib, os\n" \
         "if os.environ.get('PLUGIN_MARKERS'):\n" \
         "    pathlib.Path(os.environ['PLUGIN_MARKERS'], __name__).touch()\n"
PLUGINS = {  # distribution -> (version, entry point name, module, its source)
    "bad-plugin-raises": ("2.3", "raises", "raising_family",
                          MARKER + "raise RuntimeError('boom \\x1b[2J cleared\\nsecond line')\n"),
    "plugin-without-declaration": ("0.9", "nodecl", "nodecl_family:NoDecl",
                                   MARKER + "from phoenix_keypoints.extract.families import Family\n"
                                            "class NoDecl(Family):\n"
                                            "    def open_estimator(self, settings, num_threads=1):\n"
                                            "        return None\n"),
    # a family as a module, as plugins were before a family was a class (issue 55 item 1)
    "plugin-as-module": ("1.4", "asmodule", "asmodule_family",
                         MARKER + "def declaration(settings):\n    return None\n"
                                  "def open_estimator(settings, num_threads=1):\n    return None\n"),
}


def install_plugins(site: Path) -> None:
    """Each distribution as pip leaves it: its module, and a dist-info naming its entry point."""
    for dist, (version, name, module, source) in PLUGINS.items():
        (site / f"{module.partition(':')[0]}.py").write_text(source)
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[phoenix_keypoints.families]\n{name} = {module}\n")


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """The environment with both installed, and the folder where their imports leave markers."""
    site = tmp_path_factory.mktemp("broken-site")
    install_plugins(site)
    markers = tmp_path_factory.mktemp("markers")
    return {"PYTHONPATH": str(site), "PLUGIN_MARKERS": str(markers)}, markers


def imported(markers: Path) -> list[str]:
    found = sorted(p.name for p in markers.iterdir())
    for p in markers.iterdir():
        p.unlink()
    return found


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["models", "list"], ["run", "--help"],
                                  ["export", "--help"], ["status", "--help"]],
                         ids=["help", "version", "models-list", "run-help", "export-help",
                              "status-help"])
def test_a_broken_plugin_stops_no_command_that_does_not_name_it(args: list[str], broken) -> None:
    """--help, --version and models list list installed families from their metadata: neither
    module is imported, nothing is said of them but their names."""
    env, markers = broken
    # wide: argparse wraps help at hyphens too ("bad-" / "plugin-raises"), wherever the text puts them
    proc = run_cli(args, env={**env, "COLUMNS": "1000"})
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert imported(markers) == []
    assert "warning" not in proc.stderr, proc.stderr
    if args[-1] == "--help" and args[0] == "run":
        said = " ".join(proc.stdout.split())
        assert "raises (installed: bad-plugin-raises 2.3)" in said, said
        assert "nodecl (installed: plugin-without-declaration 0.9)" in said, said
        assert "asmodule (installed: plugin-as-module 1.4)" in said, said


@pytest.mark.slow
def test_runs_of_other_families_never_import_a_plugin(broken, sample_root: Path,
                                                      wholebody_options: list[str],
                                                      tmp_path: Path) -> None:
    """A Holistic run and a whole-body run (coordinator and workers) with both installed: done,
    neither module imported, nothing said of them."""
    env, markers = broken
    for name, chosen in (("holistic", []), ("wholebody", wholebody_options)):
        proc = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / name, "--workers", "2",
                        "--limit-videos", "1", *chosen], env=env)
        assert_no_traceback(proc)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / name / "keypoints.parquet").is_file()
        assert imported(markers) == [], name
        assert "plugin" not in proc.stderr and "raises" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("name, said", [
    ("raises", "the raises family cannot be used: plugin bad-plugin-raises 2.3 (raises = "
               "raising_family) failed to import: RuntimeError: boom \\x1b[2J cleared second line."),
    ("nodecl", "the nodecl family cannot be used: plugin plugin-without-declaration 0.9 (nodecl = "
               "nodecl_family:NoDecl) keeps no family contract: lacks declaration(settings); "
               "lacks declaration_of_schema(schema); lacks file_record(settings, recorded)"),
    ("asmodule", "the asmodule family cannot be used: plugin plugin-as-module 1.4 (asmodule = "
                 "asmodule_family) names a module, not a subclass of "
                 "phoenix_keypoints.extract.families.Family (a family is a class: "
                 "docs/families.md says how to write one). Fix or uninstall plugin-as-module"),
])
def test_a_command_naming_a_broken_plugin_says_which_and_exits_2(name: str, said: str, broken,
                                                                 sample_root: Path,
                                                                 tmp_path: Path) -> None:
    """The run that names it: exit 2 before anything is written, one line naming the
    distribution, its version and the error, escaped (no ESC reaches the terminal)."""
    env, markers = broken
    proc = run_cli(["run", "--dataset", sample_root, "--out", tmp_path / "R", "--estimator", name],
                   env=env)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "R").exists()
    assert imported(markers) == [f"{name}_family".replace("raises", "raising")]


def test_a_question_about_every_family_skips_a_broken_plugin_with_a_warning(
        broken, tmp_path: Path) -> None:
    """`diff` of files no built-in family wrote asks every installed family: each broken one is
    skipped with a warning naming it, and the command says what it says without them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    env, markers = broken
    for name in ("a", "b"):
        pq.write_table(pa.table({"frame": [0], "mystery": [[1.0, 2.0]]}), tmp_path / f"{name}.parquet")
    proc = run_cli(["diff", tmp_path / "a.parquet", tmp_path / "b.parquet"], env=env)
    assert_no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    warnings = sorted(line for line in proc.stderr.splitlines() if line.startswith("warning:"))
    assert len(warnings) == 3 and all(w.endswith("Skipped here.") for w in warnings), proc.stderr
    assert "plugin-as-module 1.4" in warnings[0] and "not a subclass of" in warnings[0]
    assert "plugin-without-declaration 0.9" in warnings[1] and "lacks declaration" in warnings[1]
    assert "bad-plugin-raises 2.3" in warnings[2] and "RuntimeError: boom" in warnings[2]
    assert imported(markers) == ["asmodule_family", "nodecl_family", "raising_family"]


def test_the_python_face_names_the_broken_plugin(broken, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """extract_keypoints(estimator=...) of a broken plugin: a ValueError (FamilyError) with the
    same words; the registry still answers for the built-in families."""
    import numpy as np

    from phoenix_keypoints import extract_keypoints

    env, markers = broken
    monkeypatch.syspath_prepend(env["PYTHONPATH"])
    for attr, empty in (("PLUGINS", {}), ("_loaded", {}), ("_broken", {}), ("_scanned", [])):
        monkeypatch.setattr(estimator, attr, empty, raising=False)
    monkeypatch.setenv("PLUGIN_MARKERS", str(markers))
    assert {"raises", "nodecl"} <= set(estimator.names())
    assert imported(markers) == []
    frames = np.zeros((2, 32, 32, 3), np.uint8)
    with pytest.raises(ValueError, match="plugin bad-plugin-raises 2.3") as said:
        extract_keypoints(frames, estimator="raises")
    assert isinstance(said.value, estimator.FamilyError)
    with pytest.raises(ValueError, match="lacks declaration"):
        extract_keypoints(frames, estimator="nodecl")
    assert estimator.family("wholebody").declaration(None).name == "wholebody"


# --- the contract ---------------------------------------------------------------------------------
def test_every_built_in_family_keeps_the_contract() -> None:
    import toy_family

    for name in estimator.FAMILIES:
        assert contract.problems(estimator.family(name)) == [], name
    assert contract.problems(toy_family.Toy()) == []


def test_the_contract_names_what_a_family_lacks_or_gives_wrongly_typed() -> None:
    import toy_family

    from phoenix_keypoints.extract.families import Family

    class HalfDone(Family):
        declaration = staticmethod(toy_family.declaration)
        declaration_of_schema = staticmethod(toy_family.declaration_of_schema)
        asked_settings = staticmethod(toy_family.asked_settings)
        ABOUT = 3
        EXPORTS = {"mine": "not a writer"}

        def open_estimator(self, settings):  # the tool passes num_threads too
            return None

    assert contract.problems(HalfDone()) == [
        "open_estimator(settings) cannot take the tool's call open_estimator(settings, "
        "num_threads)",
        "lacks file_record(settings, recorded)",
        "EXPORTS['mine'] is not callable",
        "ABOUT is an int, not a str",
        "gives asked_settings but lacks settings_conflicts(asked, recorded)"]

    class WrongDecl(toy_family.Toy):
        def declaration(self, settings=None):
            return {"points": (4, 3)}

    assert contract.problems(WrongDecl()) == ["declaration(None) gave a dict, not a Declaration"]
    assert contract.problems(toy_family) == [
        "is a module, not a subclass of phoenix_keypoints.extract.families.Family"]


def test_an_installed_familys_estimator_is_held_to_the_contract() -> None:
    import toy_family

    est = toy_family.ToyEstimator()
    assert contract.estimator_problems(est) == []
    est.close = None
    est.lanes = 3
    assert contract.estimator_problems(est) == [
        "lacks close()", "gives `lanes` but lacks start_lane(lane) or process_lanes(windows)"]


def test_a_declaration_is_built_by_keywords() -> None:
    with pytest.raises(TypeError):
        Declaration("pos", {"pos": (4, 3)})  # type: ignore[misc]
    assert Declaration(name="kw", parts={"kw": (4, 3)}).schema.names[-1] == "kw"


def test_the_guide_documents_every_hook_with_its_signature() -> None:
    """docs/families.md names each hook of the contract as the tool calls it."""
    from helpers import REPO

    guide = (REPO / "docs" / "families.md").read_text()
    missing = [h.signature for h in contract.HOOKS if f"`{h.signature}`" not in guide]
    assert not missing, missing


def test_run_job_refuses_a_broken_plugin_it_names(broken, monkeypatch: pytest.MonkeyPatch,
                                                  sample_root: Path, tmp_path: Path) -> None:
    """run_job(estimator=...) of a broken plugin: RunRefused in the command line's words."""
    from phoenix_keypoints import RunRefused, run_job

    env, markers = broken
    monkeypatch.syspath_prepend(env["PYTHONPATH"])
    for attr, empty in (("PLUGINS", {}), ("_loaded", {}), ("_broken", {}), ("_scanned", [])):
        monkeypatch.setattr(estimator, attr, empty, raising=False)
    with pytest.raises(RunRefused, match="plugin bad-plugin-raises 2.3 .* failed to import"):
        run_job(dataset=sample_root, out=tmp_path / "R", estimator="raises")
    assert not (tmp_path / "R").exists()


# --- telemetry: off before any family loads (issue 52 item 7) -------------------------------------
def test_a_plugin_that_imports_onnxruntime_gets_its_telemetry_off(tmp_path: Path) -> None:
    """A family written from docs/families.md (nothing about telemetry: tests/ort_toy_family.py)
    that imports onnxruntime and makes a session, used by extract_keypoints in a plain python:
    onnxruntime's telemetry is off, so nothing appears under $HOME/.cache/Microsoft (on a597681
    its device id did)."""
    import subprocess
    import sys

    from helpers import REPO, careful_env, family_env
    from tiny_onnx import tiny_models

    site, home = tmp_path / "site", tmp_path / "home"
    site.mkdir()
    home.mkdir()
    env = family_env(site, "ort_toy", "toy = ort_toy_family:OrtToy")  # tests/ort_toy_family.py
    model = tiny_models(tmp_path / "m")["detector"]
    code = ("import numpy as np; from phoenix_keypoints import extract_keypoints; "
            "k = extract_keypoints(np.zeros((2, 32, 32, 3), np.uint8), estimator='toy'); "
            "import onnxruntime, os; print(len(k.status), os.environ.get('ORT_DISABLE_TELEMETRY'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=careful_env(
                              {"HOME": str(home), "ORT_TOY_MODEL": str(model),
                               "PYTHONPATH": f"{env['PYTHONPATH']}:{REPO}"}))
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert not (home / ".cache" / "Microsoft").exists(), sorted(home.rglob("*"))
    assert proc.stdout.split() == ["2", "1"] and "onnxruntime was imported" not in proc.stderr


@pytest.mark.parametrize("args", [["run", "--help"], ["--help"], ["models", "list"]],
                         ids=["run-help", "help", "models-list"])
def test_a_distribution_name_with_escapes_is_printed_escaped(args: list[str],
                                                             tmp_path: Path) -> None:
    """An installed distribution whose METADATA `Name:` holds ESC[31m and a CR (a folded line),
    advertising a family: `run --help` printed the raw ESC on a597681 while `--help`, `models
    list` and `run --estimator` escaped it (issue 52 item 5). No command lets it reach the
    terminal; its module is never imported (it does not even exist)."""
    info = tmp_path / "evil_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\x1b[31mred\r x\n"
                                   "Version: 1.0\n", newline="")
    (info / "entry_points.txt").write_text("[phoenix_keypoints.families]\nredfam = redfam_family\n")
    proc = run_cli(args, env={"PYTHONPATH": str(tmp_path), "COLUMNS": "1000"})
    assert_no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert "\x1b" not in said and "\r" not in said, said
    if args == ["run", "--help"]:
        assert "redfam (installed: evil\\x1b[31mred\\x" in said, said  # the CR or its fold escaped
