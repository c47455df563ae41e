"""What each hostile wheelhouse costs scripts/gpu_install.py (issue 52 item 4): the exit, wall
seconds, the kernel's peak RSS of the process (wait4) and its last line, for `--join` of a
fake 3 MiB onnxruntime-gpu wheel split into 1 MiB parts made hostile as tests/test_gpu_node.py
makes each case, and for `--wheelhouse --split-mb V` with pip pointed at a local folder
(PIP_NO_INDEX, PIP_FIND_LINKS). Each run may map ADDRESS_SPACE bytes and is stopped after
--timeout, so an older script that reads a sparse 20 GB part whole or opens a FIFO shows as
such instead of filling or holding this machine.

    python scripts/bench/hostile_install.py [--name hostile-install.json]
    python scripts/bench/hostile_install.py --script OLD.py --name ...   # another version of it
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2]),
                str(Path(__file__).resolve().parents[2] / "tests")]
from common import REPO, machine, save_json  # noqa: E402
from test_gpu_node import HOSTILE_HOUSE, fake_gpu_wheel  # noqa: E402

ADDRESS_SPACE = 4 << 30
SPLIT_VALUES = ("0", "1e-9", "nan", "-1", "+5")


def measure(cmd: list[object], env: dict[str, str], timeout: float) -> dict:
    """One run of the script: exit (None: stopped at the timeout), wall s, peak RSS MiB, last line."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    with tempfile.TemporaryFile("w+") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **env}, preexec_fn=cap, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        wall = time.monotonic() - t0
        log.seek(0)
        lines = [x for x in log.read().splitlines() if x.strip()]
    code = os.waitstatus_to_exitcode(status)
    return {"exit": None if code == -9 else code, "wall_s": round(wall, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "said": lines[-1][:240] if lines else ""}


def tree_with(script: Path, root: Path) -> Path:
    """A copy of the script where it reads pyproject.toml and constraints.txt from (its REPO)."""
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(REPO / name, root / name)
    (root / "scripts").mkdir()
    shutil.copy(script, root / "scripts" / "gpu_install.py")
    return root / "scripts" / "gpu_install.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--script", type=Path, default=REPO / "scripts" / "gpu_install.py")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--name", default="hostile-install.json", help="file name under docs/results/")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = tree_with(args.script, root)
        fake_gpu_wheel(root / "local")
        env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(root / "local"),
               "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        run = [sys.executable, script]
        made = measure([*run, "--wheelhouse", root / "wh", "--only-onnxruntime", "--split-mb", "1"],
                       env, 300)
        results = {"split into 1 MiB parts (pip, local folder)": made}
        for case, mutate, _ in HOSTILE_HOUSE:
            wh = root / "case"
            shutil.copytree(root / "wh", wh, symlinks=True)
            mutate(wh)
            results[case] = measure([*run, "--join", wh], env, args.timeout)
            shutil.rmtree(wh, ignore_errors=True)
        for value in SPLIT_VALUES:
            wh = root / "split"
            fake_gpu_wheel(wh)
            results[f"--split-mb {value}"] = {
                **measure([*run, "--wheelhouse", wh, "--only-onnxruntime", "--split-mb", value],
                          env, args.timeout), "left": sorted(os.listdir(wh))}
            shutil.rmtree(wh)
    for case, r in results.items():
        print(f"{case:34} exit {r['exit']!s:4} {r['wall_s']:6.2f} s {r['peak_rss_mib']:7.1f} MiB  "
              f"{r['said'][:90]}")
    save_json(args.name, {"machine": machine(), "script": str(args.script),
                          "address_space": ADDRESS_SPACE, "timeout_s": args.timeout,
                          "cases": results})


if __name__ == "__main__":
    main()
