"""Tensor presets are a family's data (issue 38): `tensors` reads presets, point names, --points
parts, the normalisation anchor and the points.json words from the run's declaration (its
`PointTable`), never from one family's numbering. The proof: tests/toy_presets.py, a family with
presets written in the tests only, goes through run, `tensors --preset/--points/--normalize` and
`tensors --help`; and Holistic's refined numbering (553 points) is asked for by its own name.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import toy_presets
from helpers import assert_no_traceback, cli_ok, family_env, run_cli


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """tests/toy_presets.py made known as an installed package would (an entry point)."""
    return family_env(tmp_path_factory.mktemp("site"), "toypresets", "toypts = toy_presets:ToyPresets")


ok = cli_ok


@pytest.fixture(scope="module")
def toy_run(sample_root: Path, env: dict[str, str], tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toypts") / "run"
    ok(["run", "--dataset", sample_root, "--out", out, "--estimator", "toypts", "--workers", "1"],
       env)
    return out


def _values(run: Path) -> tuple[str, np.ndarray]:
    """The first split's points as keypoints.parquet holds them, [frames, 4, 3] in file order."""
    t = pq.read_table(run / "keypoints.parquet")
    split = t["split"][0].as_py()
    rows = t.filter(pc.equal(t["split"], split))[toy_presets.NAME].to_pylist()
    return split, np.array([r if r is not None else [0.0] * 12 for r in rows],
                           np.float32).reshape(-1, 4, 3)


def test_a_declaration_without_a_schema_makes_it_from_what_it_says() -> None:
    """The shared columns, a float32 list per landmark column, an int32 per count column."""
    from phoenix_keypoints.extract.keypoints.schema import BASE_FIELDS

    assert toy_presets.SCHEMA.equals(pa.schema(
        [*BASE_FIELDS, pa.field("toypts", pa.list_(pa.float32())), pa.field("bright", pa.int32())]))


def test_a_family_with_presets_gets_its_default_set_and_presets(toy_run: Path,
                                                                env: dict[str, str]) -> None:
    split, values = _values(toy_run)
    default = np.load(toy_run / "tensors" / f"{split}.npy")
    np.testing.assert_array_equal(default, values)  # the merge wrote the table's full set
    meta = json.loads((toy_run / "tensors" / "points.json").read_text())
    assert meta["points"][3]["name"] == "toypts.bottom_right" and meta["quarters"] == 4
    assert meta["units"] == toy_presets.TABLE.units and meta["mask"] == toy_presets.TABLE.mask

    ok(["tensors", "--out", toy_run, "--preset", "diagonal-2"], env)
    got = np.load(toy_run / "tensors" / "diagonal-2" / f"{split}.npy")
    np.testing.assert_array_equal(got, values[:, [3, 0]])
    ok(["tensors", "--out", toy_run, "--points", "toypts:1-2", "--name", "mid"], env)
    np.testing.assert_array_equal(np.load(toy_run / "tensors" / "mid" / f"{split}.npy"),
                                  values[:, [1, 2]])
    names = [p["name"] for p in json.loads((toy_run / "tensors" / "mid" / "points.json")
                                           .read_text())["points"]]
    assert names == ["toypts.top_right", "toypts.bottom_left"]
    # read through the registry: an installed family's presets where the run in --out is its
    # run (plain `tensors --help` imports no installed family, issue 46)
    assert "diagonal-2" in ok(["tensors", "--out", toy_run, "--help"], env)
    assert "diagonal-2" not in ok(["tensors", "--help"], env)


def test_a_family_with_presets_normalises_by_its_own_anchor(toy_run: Path,
                                                            env: dict[str, str]) -> None:
    """--normalize shoulders uses the table's anchor points (here the top two quarters)."""
    split, values = _values(toy_run)
    ok(["tensors", "--out", toy_run, "--preset", "top-2", "--normalize", "shoulders-per-frame",
        "--name", "norm"], env)
    got = np.load(toy_run / "tensors" / "norm" / f"{split}.npy")
    t = pq.read_table(toy_run / "keypoints.parquet")
    t = t.filter(pc.equal(t["split"], split))
    w = t["width"].to_numpy().astype(np.float64)[:, None]
    px = values[:, :2, :2].astype(np.float64) * np.stack([w, t["height"].to_numpy()[:, None]], -1)
    mid, width = px.mean(axis=1), np.linalg.norm(px[:, 0] - px[:, 1], axis=1)
    want = (px - mid[:, None]) / width[:, None, None]
    np.testing.assert_allclose(got[:, :, :2], want, rtol=1e-5, atol=1e-6)


def test_a_family_without_world_coordinates_refuses_them(toy_run: Path, env: dict[str, str]
                                                         ) -> None:
    proc = run_cli(["tensors", "--out", toy_run, "--points", "toypts", "--coords", "world"], env=env)
    assert_no_traceback(proc)
    assert proc.returncode == 2 and "no world coordinates" in proc.stderr, proc.stderr
    proc = run_cli(["tensors", "--out", toy_run, "--preset", "compact-187"], env=env)
    assert proc.returncode == 2 and "unknown preset 'compact-187'" in proc.stderr, proc.stderr
