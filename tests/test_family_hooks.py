"""What the command line takes from several families at once: each hook read once, whatever the
number of families that give it (tests/toy_family.py's declaration stands in for another family)."""

from __future__ import annotations

import sys
import types

import pytest
import toy_family

from phoenix_keypoints.extract.keypoints import estimator
from phoenix_keypoints.jobs.cli import build_parser


def test_two_families_publishing_models_add_models_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second family with PUBLISHED_MODELS: `run` and `slurm` still take one --models (the
    first publisher's words), not a conflicting second one."""
    twin = types.ModuleType("publishing_twin")
    twin.declaration = toy_family.declaration
    twin.declaration_of_schema = lambda schema: None
    twin.PUBLISHED_MODELS = {}
    monkeypatch.setitem(sys.modules, "publishing_twin", twin)
    monkeypatch.setitem(estimator.FAMILIES, "twin", "publishing_twin")
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("run", "slurm"):
        flags = [s for a in commands[name]._actions for s in a.option_strings]
        assert flags.count("--models") == 1 and flags.count("--models-dir") == 1, name
    args = parser.parse_args(["run", "--dataset", "d", "--out", "o", "--models", "balanced"])
    assert args.models == "balanced"
