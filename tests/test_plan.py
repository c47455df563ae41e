"""Planning: whole videos, contiguous, balanced, deterministic; at full scale from the real index."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from phoenix_keypoints.extract.corpora import discover
from phoenix_keypoints.extract.corpora.base import SPLITS, Dataset, Video
from phoenix_keypoints.jobs.run.plan import balanced_cuts, make_plan


def test_cuts_are_contiguous_balanced_and_whole():
    frames = [16, 475, 120, 80, 300, 90, 200, 33, 150, 60]
    cuts = balanced_cuts(frames, 400)
    assert cuts == sorted(cuts), "chunks must be contiguous in output order"
    assert cuts[0] == 0 and set(cuts) == set(range(cuts[-1] + 1)), "dense ids, no empty chunk"
    sizes = [sum(f for f, c in zip(frames, cuts, strict=True) if c == k) for k in set(cuts)]
    assert max(sizes) - min(sizes) <= max(frames)
    assert balanced_cuts(frames, 400) == cuts, "deterministic"
    assert balanced_cuts(frames, 10**9) == [0] * len(frames)


def _index_dataset(index: Path) -> Dataset:
    videos = []
    for split in SPLITS:
        with open(index / f"PHOENIX-2014-T.{split}.frame_counts.tsv") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                n = int(row["num_frames"])
                videos.append(Video(split, row["name"], f"x/{split}/{row['name']}",
                                    tuple(f"images{i:04d}.png" for i in range(1, n + 1))))
    videos.sort(key=lambda v: (v.split, v.name))
    return Dataset(index, "phoenix-2014-T", videos)


def test_full_release_plan(shared_index: Path):
    ds = _index_dataset(shared_index)
    assert len(ds.videos) == 8257 and ds.num_frames == 947756
    plan = make_plan(ds, 1, 1000)
    chunks = plan["chunk"].to_pylist()
    frames = plan["num_frames"].to_pylist()
    assert chunks == sorted(chunks)
    per_chunk: dict[int, int] = {}
    for c, n in zip(chunks, frames, strict=True):
        per_chunk[c] = per_chunk.get(c, 0) + n
    assert sum(per_chunk.values()) == 947756
    assert len(per_chunk) == 948  # ceil(947756 / 1000)
    assert max(per_chunk.values()) - min(per_chunk.values()) <= 475  # the longest video
    # A video never spans two chunks: one row per video and one chunk per row.
    assert len(plan) == 8257


def test_discover_shared_sample(shared_sample: Path):
    ds = discover(shared_sample)
    assert ds.layout == "phoenix-2014-T"
    by_name = {v.name: v for v in ds.videos}
    assert by_name["signer_demo-1"].num_frames == 58
    assert by_name["fingerspelling_hand-1"].num_frames == 80
    assert ds.num_frames == 143
    assert by_name["fingerspelling_hand-1"].files[:2] == ("images0001.png", "images0002.png")
    assert [v.split for v in ds.videos] == sorted(v.split for v in ds.videos)
    assert ds.unlisted == []
    assert discover(shared_sample).fingerprint() == ds.fingerprint()


def test_limit_and_select(shared_sample: Path):
    ds = discover(shared_sample, limit_videos=1)
    assert sorted(v.name for v in ds.videos) == [
        "25October_2010_Monday_tagesschau-17", "signer_demo-1", "two_hands-1"]
    ds = discover(shared_sample, splits=("test",), videos=["portrait-1"])
    assert [v.name for v in ds.videos] == ["portrait-1"]


@pytest.mark.parametrize("n", [9, 10, 11, 100])
def test_frames_sort_numerically(tmp_path: Path, n: int):
    """Unpadded numbers, where plain string order would put images10 before images2."""
    from phoenix_keypoints.extract.corpora.phoenix import list_frames

    for i in range(1, n + 1):
        (tmp_path / f"images{i}.png").write_bytes(b"")
    (tmp_path / "stray.lprof").write_bytes(b"")
    names, ignored, _ = list_frames(tmp_path)
    assert names == [f"images{i}.png" for i in range(1, n + 1)]
    assert n < 10 or names != sorted(names)
    assert ignored == [("stray.lprof", "not a frame name")]
