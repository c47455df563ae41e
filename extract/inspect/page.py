"""Render the report page from its context with Jinja2 (extract/inspect/templates/report.html.j2).

Autoescaping is on: video names, notes and paths come from the dataset and are shown as text.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: Any) -> str:
    return "–" if _missing(x) else f"{100 * x:.1f}%"


def num(x: Any, digits: int = 0) -> str:
    return "–" if _missing(x) else f"{x:,.{digits}f}"


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=pct, num=num)
    return env


def render_page(context: dict[str, Any]) -> str:
    return environment().get_template("report.html.j2").render(**context)
