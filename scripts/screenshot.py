"""Make the README's screenshot of the quality report from the shared sample, and the figures it shows.

    .venv/bin/python scripts/screenshot.py   # writes docs/report-screenshot.png and .json

Runs the job on the shared sample (../shared/data/phoenix-sample, 6 videos, 143 frames) as the
suite's reference run does, `report` on it, renders the page in Debian's headless Chromium
(scripts/system-deps.sh chromium) with the tests' flags, and writes beside the PNG a JSON of the
figures the page shows per video (frames, share of frames where each part was found), the PNG's
sha256 and the caption the README quotes. tests/test_screenshot.py recomputes the figures from
the suite's run of the same sample and checks the JSON, the PNG's hash and the README's caption,
so a change of the code that moves a figure fails until this script is run again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO.parent / "shared" / "data" / "phoenix-sample" / "PHOENIX-2014-T"
RUN = Path("/tmp/phoenix-keypoints/sample-run")  # the path the page shows
PNG = REPO / "docs" / "report-screenshot.png"
PARTS = ("pose", "face", "left_hand", "right_hand")
FEATURED = "fingerspelling_hand-1"  # the video the caption speaks of (pose not found everywhere)
CHROMIUM = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars"]


def figures(videos: dict[str, dict]) -> dict[str, dict]:
    """video -> frames and, per part, the percentage of its frames found, rounded as the page
    shows it ("85.0%"); `videos` maps a video to its `frames` and `<part>_rate` (0-1)."""
    return {v: {"frames": int(r["frames"]),
                **{part: f"{100 * r[f'{part}_rate']:.1f}" for part in PARTS}}
            for v, r in sorted(videos.items())}


def caption(shown: dict[str, dict]) -> str:
    """The README's line under the screenshot, from the figures."""
    f = shown[FEATURED]
    return (f"{len(shown)} videos, {sum(r['frames'] for r in shown.values())} frames; "
            f"`{FEATURED}`: pose in {f['pose']} % of {f['frames']} frames, right hand "
            f"{f['right_hand']} %")


def cli(*args: object) -> None:
    """One command of the tool, from this Python; its own exit status is kept."""
    subprocess.run([sys.executable, "-m", "phoenix_keypoints", *map(str, args)], check=True)


def shoot(page: Path, png: Path) -> None:
    """The page in headless Chromium, 1280 px wide, as tests/test_report.py renders it."""
    subprocess.run(["bash", str(REPO / "scripts" / "system-deps.sh"), "chromium"], check=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(["chromium", *CHROMIUM, f"--user-data-dir={profile}",
                        "--window-size=1280,2330", f"--screenshot={png}", page.as_uri()],
                       check=True, capture_output=True, timeout=180)


def main() -> None:
    """Run, report, render; write the PNG and its JSON; print the caption."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", type=Path, default=SAMPLE)
    ap.add_argument("--png", type=Path, default=PNG)
    a = ap.parse_args()
    shutil.rmtree(RUN, ignore_errors=True)
    cli("run", "--dataset", a.dataset, "--out", RUN, "--chunk-frames", 60)
    cli("report", "--out", RUN)
    shoot(RUN / "report" / "index.html", a.png)
    import pyarrow.parquet as pq

    rows = pq.read_table(RUN / "report" / "videos.parquet").to_pylist()
    shown = figures({r["video"]: r for r in rows})
    record = {"sample": "../shared/data/phoenix-sample", "videos": shown, "caption": caption(shown),
              "png_sha256": hashlib.sha256(a.png.read_bytes()).hexdigest()}
    a.png.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    print(record["caption"])


if __name__ == "__main__":
    main()
