"""What the command line takes from several families at once: each hook read once, whatever the
number of families that give it (tests/toy_family.py's declaration stands in for another family)."""

from __future__ import annotations

from phoenix_keypoints.jobs.cli import build_parser


def test_two_families_publishing_models_add_models_once() -> None:
    """Two built-in families publish models (the whole-body and the 3D family's published.py):
    `run` and `slurm` still take one --models, which names either family's models."""
    from phoenix_keypoints.jobs.models import publishers

    assert len(publishers()) >= 2
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("run", "slurm"):
        flags = [s for a in commands[name]._actions for s in a.option_strings]
        assert flags.count("--models") == 1 and flags.count("--models-dir") == 1, name
    args = parser.parse_args(["run", "--dataset", "d", "--out", "o", "--models", "balanced"])
    assert args.models == "balanced"
