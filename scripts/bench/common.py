"""Small helpers shared by the benchmark scripts: machine facts, load, RSS sampling, JSON output.

Memory is read from /proc (Linux) so the scripts need nothing beyond the project's dependencies.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED_SAMPLE = SHARED_DATA / "phoenix-sample" / "PHOENIX-2014-T"
SHARED_INDEX = SHARED_DATA / "phoenix-2014-T-index"
RESULTS_DIR = REPO / "docs" / "results"


def machine() -> dict[str, Any]:
    """What the numbers were measured on: CPU model, usable cores, memory, date."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": platform.node(),
        "cpu": model,
        "usable_cores": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "mem_gib": round(mem_kb / 2**20, 1),
        "python": platform.python_version(),
        "git": _git_rev(),
    }


def _git_rev() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                              capture_output=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def loadavg() -> list[float]:
    """1/5/15-minute load: on a shared machine this says how much the numbers can be trusted."""
    return [round(x, 2) for x in os.getloadavg()]


def rss_mib(pid: int) -> float | None:
    """Resident set of a process in MiB (None when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def tree_pids(pid: int) -> list[int]:
    """pid and all its descendants (from /proc/*/stat parent links)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class RssSampler:
    """Samples the RSS of a process (and optionally its descendants) in a background thread."""

    def __init__(self, pid: int, every_s: float = 0.25, tree: bool = False) -> None:
        self.pid, self.every_s, self.tree = pid, every_s, tree
        self.samples: list[tuple[float, float]] = []  # (seconds since start, MiB)
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            pids = tree_pids(self.pid) if self.tree else [self.pid]
            vals = [v for v in (rss_mib(p) for p in pids) if v is not None]
            if vals:
                self.samples.append((round(time.monotonic() - self._t0, 2), round(sum(vals), 1)))
            self._stop.wait(self.every_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak(self) -> float:
        return max((m for _, m in self.samples), default=0.0)


def measure(cmd: list[str], every_s: float = 0.25, tree: bool = False,
            codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """Run cmd (in the repo) as a user would: wall and CPU time, peak RSS sampled from /proc
    (of the process tree with tree=True) and the kernel's high-water mark for this very child
    (wait4: not the largest of all children so far), its output, and the load around it; an exit
    status outside `codes` stops the benchmark."""
    import tempfile

    load0 = loadavg()
    with tempfile.TemporaryFile("w+") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
        with RssSampler(proc.pid, every_s=every_s, tree=tree) as rss:
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        out = log.read()
    if proc.returncode not in codes:
        raise SystemExit(f"{' '.join(cmd[2:])} failed ({proc.returncode}):\n{out}")
    return {
        "exit": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mib_sampled": rss.peak,
        "peak_rss_mib_kernel": round(usage.ru_maxrss / 1024, 1),
        "rss_timeline": rss.samples[:: max(1, len(rss.samples) // 60)],
        "output": out.strip().splitlines(),
        "load_before": load0,
        "load_after": loadavg(),
    }


def scale_parser(doc: str):
    """The options of a benchmark on a fabricated release (scratch folder, fraction, rounds, index,
    result file), shared by the scale benchmarks."""
    import argparse

    p = argparse.ArgumentParser(description=doc.split("\n")[1])
    p.add_argument("--tmp", type=Path, required=True, help="scratch folder (removed at the end)")
    p.add_argument("--fraction", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--index", type=Path, default=SHARED_INDEX)
    p.add_argument("--json", help="file name under docs/results/")
    return p


def save_json(name: str, obj: Any) -> Path:
    """Write a result under docs/results/, where docs/performance.md links each figure to its file."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / name
    path.write_text(json.dumps(obj, indent=2) + "\n")
    return path


def table(rows: list[list[Any]], header: list[str]) -> str:
    """A Markdown table (pasted as is into docs/performance.md)."""
    cells = [[str(c) for c in r] for r in [header, *rows]]
    lines = ["| " + " | ".join(r) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("---" for _ in header) + "|")
    return "\n".join(lines)
