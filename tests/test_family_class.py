"""A family is a class (issue 55 item 1): `Family` holds the whole contract with its defaults, so
no module reads a hook with getattr and its own default; every built-in family and the example
plugin subclass it; the registry makes one instance a family and refuses a class that is none;
docs/families.md documents every public member of the class.

(An installed module-style plugin, refused when named while other commands go on, is in
tests/test_plugins.py: `plugin-as-module`.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import REPO

from phoenix_keypoints.extract.families import Family
from phoenix_keypoints.extract.keypoints import contract, estimator
from phoenix_keypoints.extract.keypoints.estimator import FamilyError, family

HOOK_NAMES = frozenset(h.name for h in contract.HOOKS)
CONTRACT = REPO / "extract" / "keypoints" / "contract.py"
ROOMS = ("extract", "jobs", "phoenix_keypoints", "scripts", "examples")


def hook_lookups(path: Path) -> list[str]:
    """Each `getattr(x, "HOOK", ...)` / `hasattr(x, "HOOK")` of a module, as "LINE: HOOK"."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in HOOK_NAMES):
            out.append(f"{node.lineno}: {node.args[1].value}")
    return out


def test_no_hook_is_read_by_getattr_outside_the_class() -> None:
    """The defaults live in Family alone: every call site calls the method or reads the
    attribute (contract.py, which checks a family against the class, is the one exception)."""
    found = {}
    for room in ROOMS:
        for path in sorted((REPO / room).rglob("*.py")):
            if path != CONTRACT and (said := hook_lookups(path)):
                found[path.relative_to(REPO).as_posix()] = said
    assert not found, found


@pytest.mark.parametrize("source, hits", [
    ('own = getattr(fam, "write_report", None)\n', ["1: write_report"]),
    ('x = hasattr(family(n), "on_gpu")\n', ["1: on_gpu"]),
    ('n = getattr(est, "batch_size", 1)\n', []),  # an estimator's attribute: not a family hook
    ('w = fam.write_report(k, t, o)\n', []),
])
def test_the_getattr_check_is_not_blind(source: str, hits: list[str], tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert hook_lookups(path) == hits


def test_every_built_in_family_is_a_family_subclass() -> None:
    for name, spec in estimator.FAMILIES.items():
        fam = family(name)
        assert isinstance(fam, Family) and type(fam) is not Family, name
        assert spec.endswith(":" + type(fam).__name__) and fam.name == name
        assert family(name) is fam  # one instance a process
        assert contract.problems(fam) == [], name


@pytest.mark.parametrize(("example", "spec"), [("openpose25", "phoenix_openpose25:OpenPose25"),
                                             ("yolopose", "phoenix_yolopose:YoloPose")])
def test_the_example_plugins_are_family_subclasses(monkeypatch: pytest.MonkeyPatch, example: str,
                                                   spec: str) -> None:
    """examples/openpose25 and examples/yolopose from their source: each entry point names a
    Family subclass that keeps the contract and gives its own model checks (moved files:
    Family's default)."""
    import importlib

    from phoenix_keypoints.extract.keypoints.environ import telemetry_off

    where = REPO / "examples" / example
    toml = (where / "pyproject.toml").read_text()
    entry = toml.split('[project.entry-points."phoenix_keypoints.families"]\n', 1)[1]
    assert re.match(rf'{example} = "([^"]+)"', entry).group(1) == spec
    telemetry_off()
    monkeypatch.syspath_prepend(str(where / "src"))
    module, _, name = spec.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, Family)
    assert contract.problems(cls()) == []
    for own in ("check_recorded", "model_problems", "asked_settings", "settings_conflicts"):
        assert contract.overrides(cls, own), own
    assert not contract.overrides(cls, "moved_files")


def test_a_registered_module_is_refused_naming_the_base_class(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """register(name, "package:Class") is the registry's form; a module where a class belongs is
    a FamilyError naming phoenix_keypoints.extract.families.Family and the guide."""
    monkeypatch.setattr(estimator, "FAMILIES", dict(estimator.FAMILIES))
    estimator.register("toyclass", "toy_family:Toy")
    assert family("toyclass").name == "toyclass"
    assert family("toyclass").declaration(None).name == "toy"
    estimator.register("toymodule", "toy_family")
    with pytest.raises(FamilyError) as said:
        family("toymodule")
    assert "names a module, not a subclass of phoenix_keypoints.extract.families.Family" in str(
        said.value) and "docs/families.md" in str(said.value)


def test_the_defaults_are_what_a_family_without_the_member_gets() -> None:
    """A family giving only the required methods: each optional member's default, as the call
    sites had it before the class held them."""
    import toy_family

    class Bare(Family):
        declaration = staticmethod(toy_family.declaration)
        declaration_of_schema = staticmethod(toy_family.declaration_of_schema)
        open_estimator = staticmethod(toy_family.open_estimator)
        file_record = staticmethod(toy_family.file_record)

    fam = Bare()
    fam.name = "bare"
    assert contract.problems(fam) == []
    assert fam.clip_options() == () and fam.variants() == ()
    assert fam.clip_settings({}) == {"estimator": "bare"}
    assert fam.settings_of({"b": 2}, {"a": 1, "b": 1}) == {"a": 1, "b": 2}
    assert fam.settings_of(None, {"a": 1}) == {"a": 1}
    assert fam.status_line({}) == "estimator: bare" and fam.run_line({}) == ""
    assert fam.ENGINE == "The bare estimator" and type(fam).__module__ == fam.IMPORTS
    assert fam.on_gpu("cuda", True) is False and fam.gpu_memory_need({}, 8) is None
    assert fam.model_problems({}) == [] and fam.settings_conflicts({}, {}) == []
    for hook in ("write_report", "drawn_frames", "write_pose_files", "pose_of_clip",
                 "library_version", "unavailable", "device_refused", "asked_settings"):
        params = next(h.params for h in contract.HOOKS if h.name == hook)
        assert getattr(fam, hook)(*params) is None, hook
    record = {"model": {"path": "/a/m.onnx", "sha256": "ab"}}
    assert fam.moved_files({"model": {"path": "/b/m.onnx", "sha256": "ab"}}, record) == (
        {"model": {"path": "/b/m.onnx", "sha256": "ab"}}, ["model /a/m.onnx -> /b/m.onnx"])
    with pytest.raises(NotImplementedError):
        Family().declaration(None)


def guide_members() -> dict[str, str]:
    """docs/families.md's section on the class: each table row's first cell (a backticked
    signature) -> the row."""
    guide = (REPO / "docs" / "families.md").read_text()
    section = guide.split("\n## The Family class\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): line for line in section.splitlines()
            if (m := re.match(r"\| `([^`]+)` \|", line))}


def test_the_guide_documents_every_public_member_of_the_class() -> None:
    """Every public method and attribute of Family has a row with its signature as the tool
    calls it, and a default where it is optional; the guide lists nothing the class lacks."""
    rows = guide_members()
    public = {n for n in vars(Family) if not n.startswith("_")} | set(Family.__annotations__)
    signatures = {h.name: h.signature for h in contract.HOOKS} | {"name": "name"}
    assert set(signatures) == public
    missing = sorted(s for s in signatures.values() if s not in rows)
    assert not missing, missing
    extra = sorted(s for s in rows if s not in signatures.values())
    assert not extra, extra
    for hook in contract.OPTIONAL:
        cells = [c.strip() for c in rows[hook.signature].strip("|").split("|")]
        assert len(cells) >= 3 and cells[-1], hook.signature  # its default said
