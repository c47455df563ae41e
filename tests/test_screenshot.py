"""The README's screenshot and the figures quoted under it are what the current code gives on the
shared sample: scripts/screenshot.py made them, and the suite's own run of the same sample
(conftest's `shared_run`, built once a session for other tests too) gives the same figures."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

from helpers import REPO
from test_report import rates_from_keypoints

SHOT = REPO / "docs" / "report-screenshot.png"


def _script():
    """scripts/screenshot.py as a module (its figures and caption are what the test compares)."""
    spec = importlib.util.spec_from_file_location("screenshot", REPO / "scripts" / "screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_screenshot_and_its_figures_come_from_the_current_code(shared_run: Path) -> None:
    """Every video's frames and found rates in docs/report-screenshot.json equal those recomputed
    from keypoints.parquet of a run made now (the report's figures equal those:
    tests/test_report.py); the PNG is the one the script wrote with them (its sha256); the
    README's caption is the script's, from those figures."""
    script = _script()
    record = json.loads(SHOT.with_suffix(".json").read_text())
    now = script.figures(rates_from_keypoints(shared_run / "keypoints.parquet"))
    assert record["videos"] == now, "the screenshot's figures are not what the code gives now: " \
        "run scripts/screenshot.py"
    assert hashlib.sha256(SHOT.read_bytes()).hexdigest() == record["png_sha256"]
    said = script.caption(now)
    assert record["caption"] == said
    readme = " ".join((REPO / "README.md").read_text().split())
    assert said in readme, f"README.md does not quote: {said}"
