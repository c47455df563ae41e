"""What `run --dataset clip.mp4` starts (issue 53 item 11): one clip is one chunk, so one worker,
and a coordinator that plans and merges with pyarrow alone, never importing pandas (~0.4 s of CPU
a run, on the path to the first frame and after the last). Timings are the benchmark's
(scripts/bench/one_clip.py); here what the command does, on a real run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import REPO, assert_no_traceback, cli_env
from kinds import clip

# the command as `phoenix-keypoints` runs it, telling at exit whether pandas was imported
COMMAND = ("import atexit, sys\n"
           "atexit.register(lambda: print('pandas imported:', 'pandas' in sys.modules))\n"
           "from phoenix_keypoints.jobs.cli import main\n"
           "sys.argv[0] = 'phoenix-keypoints'\n"
           "sys.exit(main())\n")


def test_one_video_file_starts_one_worker_and_no_pandas(tmp_path: Path) -> None:
    """With two slots asked for, a one-video run starts one worker (its log the only one) and its
    coordinator never imports pandas; on 14e2a40 both workers started (the second stopped once
    the plan had one chunk) and planning imported pandas (pyarrow.dataset, to_numpy)."""
    video = clip(tmp_path / "clips" / "signer.mp4", 0, 4)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", COMMAND, "run", "--dataset", str(video), "--out",
                           str(out), "--workers", "2"], env=cli_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    assert "pandas imported: False" in proc.stdout, proc.stdout
    assert sorted(p.name for p in (out / "logs").glob("worker-*.log")) == ["worker-0.log"]
    assert "keypoints:" in proc.stdout and "(4 frames: all 4)" in proc.stdout, proc.stdout
