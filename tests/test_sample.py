"""The generated sample must match the PHOENIX-2014-T layout and be byte-for-byte reproducible."""

from __future__ import annotations

import csv
import hashlib
import pathlib

import cv2
import numpy as np

from phoenix_keypoints.extract.sample import build_sample

HEADER = ["name", "video", "start", "end", "speaker", "orth", "translation"]


def _digests(root: pathlib.Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_layout(tmp_path: pathlib.Path) -> None:
    root = build_sample(tmp_path)
    assert root == tmp_path / "PHOENIX-2014-T"
    assert (root / "README.txt").is_file()
    total = 0
    for split in ("train", "dev", "test"):
        csv_path = root / "annotations" / "manual" / f"PHOENIX-2014-T.{split}.corpus.csv"
        with csv_path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f, delimiter="|"))
        assert rows[0] == HEADER
        assert len(rows) > 1, f"{split} has no videos"
        split_dir = root / "features" / "fullFrame-210x260px" / split
        assert sorted(p.name for p in split_dir.iterdir()) == sorted(r[0] for r in rows[1:])
        for name, video, start, end, speaker, orth, translation in rows[1:]:
            assert video == f"{name}/1/*.png"
            assert (start, end) == ("-1", "-1")
            assert speaker and orth and translation
            folder = split_dir / name
            assert not (folder / "1").exists()
            frames = sorted(folder.iterdir())
            assert [p.name for p in frames] == [
                f"images{i:04d}.png" for i in range(1, len(frames) + 1)
            ]
            assert len(frames) >= 8
            for p in frames:
                img = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
                assert img is not None and img.dtype == np.uint8
                assert img.shape == (260, 210, 3)
            total += len(frames)
    assert 40 <= total <= 150


def test_deterministic(tmp_path: pathlib.Path) -> None:
    a = build_sample(tmp_path / "a")
    b = build_sample(tmp_path / "b")
    da, db = _digests(a), _digests(b)
    assert da and da == db
