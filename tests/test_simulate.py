"""scripts/bench/simulate.py replays the real plan and scheduler on the release's frame counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import REPO, cli_env


def test_simulate_prints_efficiency_and_wall(shared_index: Path) -> None:
    proc = subprocess.run([sys.executable, REPO / "scripts" / "bench" / "simulate.py", "--nodes", "2",
                           "--workers-per-node", "4", "--frames-per-s", "20", "--json"],
                          env=cli_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["frames"] == 947_756 and result["nodes"] == 2
    assert sum(result["chunks_per_node"]) == result["chunks"]
    assert all(n > 0 for n in result["chunks_per_node"]), "both nodes took work"
    # 8 workers, each with ~6,000 s of frames: nothing but start-up and one video of tail is lost
    assert 0.97 < result["efficiency"] <= 1.0
    ideal = 947_756 / (8 * 20)
    assert ideal < result["wall_s"] < ideal * 1.05 + max(result["start_delays_s"])
