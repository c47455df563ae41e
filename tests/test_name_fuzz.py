"""The name fuzzer's seeded slice (issue 37): one example per input kind, every position covered.

tests/name_fuzz.py builds each corpus with one name of random bytes and runs the real `run`
(whole-body estimator, tiny ONNX models); scripts/fuzz_names.py runs every (kind, position) pair
over many seeds (its last result: docs/results/fuzz-names.json). Here each example takes the first
seed whose name holds bytes that are no UTF-8, the hardest case for every position; about 10 runs,
a minute of CPU.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers import VIDEOS

# (kind, position): every kind once, every position once
SLICE = (("frame-folder", "frame"), ("frame-folders", "subfolder"), ("phoenix", "csv"),
         ("one-video", "dataset"), ("videos", "video"), ("manifest", "model"), ("tar", "member"),
         ("tar.gz", "archive"), ("zip", "folder"))


def _hostile_seed(kind: str, position: str) -> int:
    import name_fuzz

    return next(seed for seed in range(1000) if not name_fuzz.is_utf8(
        name_fuzz.random_name(random.Random(f"{kind}/{position}/{seed}"))))


@pytest.mark.slow
def test_random_byte_names_in_every_position(tmp_path: Path):
    """Every example ends with an exit its position allows, no traceback, nothing opened outside
    the dataset, nothing raw on the terminal, and the good frames as in the clean run (before,
    on 2e4d814: the one-video input and the .tar.gz so named were a traceback and a refusal)."""
    if not (VIDEOS / "signer_demo.mp4").is_file():
        pytest.skip("shared data not found beside the repo (../shared/data)")
    import name_fuzz

    assert {k for k, _ in SLICE} == set(name_fuzz.KINDS)
    assert {p for _, p in SLICE} == {p for ps in name_fuzz.POSITIONS.values() for p in ps}
    material = name_fuzz.Material(tmp_path / "material")
    reference = name_fuzz.reference_run(material)
    results = [name_fuzz.fuzz_one(material, reference, kind, position,
                                  _hostile_seed(kind, position), tmp_path / f"{kind}-{position}")
               for kind, position in SLICE]
    broken = [f"{r['kind']}/{r['position']} name {r['shown']!r} exit {r['exit']}: "
              f"{r['problems']}\n{r['said']}" for r in results if r["problems"]]
    assert not broken, "\n\n".join(broken)
    assert sum(r["rows"] for r in results) > 0
