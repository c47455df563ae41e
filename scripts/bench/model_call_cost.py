#!/usr/bin/env python3
"""What the bound on every model call costs a call (issue 53 item 12): wall and CPU microseconds
per call of `bounded()` around the tiny detector's onnxruntime call (tests/tiny_onnx.py; ~0.3 ms,
one frame a call as the tiny whole-body runs make them), against the bare call (67bac1c had no
bound) and against another checkout's model_calls.py (--against: e.g. a worktree of main, whose
watchdog started a thread a call). Blocks of calls alternate, their order rotating, in this one
process pinned to one core, so load falls on all alike.

    .venv/bin/python scripts/bench/model_call_cost.py --against /tmp/wt-main --json model-call-cost.json
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] /
                                                          "tests")]
from common import loadavg, machine, save_json, table  # noqa: E402

from phoenix_keypoints.extract.keypoints import model_calls  # noqa: E402


def module_of(tree: Path) -> Any:
    """Another checkout's model_calls.py, loaded beside this one (its imports resolve here)."""
    spec = importlib.util.spec_from_file_location(
        f"model_calls_{tree.name}", tree / "extract" / "keypoints" / "model_calls.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def callers(session: Any, feed: dict, against: Any | None) -> dict[str, Callable[[], Any]]:
    """name -> one model call as each variant makes it."""
    def bounded_by(mod: Any) -> Callable[[], Any]:
        return lambda: mod.bounded(lambda: session.run(None, feed, mod.run_options()),
                                   "--detector", Path("tiny.onnx"))

    quiet = model_calls._quiet()
    out = {"bare": lambda: session.run(None, feed, quiet), "bounded": bounded_by(model_calls)}
    if against is not None:
        out["bounded@against"] = bounded_by(against)
    return out


def block(call: Callable[[], Any], n: int) -> tuple[float, float]:
    """(wall, CPU) microseconds a call over n calls."""
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        call()
    return (1e6 * (time.perf_counter() - w0) / n, 1e6 * (time.process_time() - c0) / n)


def bench(rounds: int, calls: int, against: Path | None) -> dict:
    import numpy as np
    import onnxruntime as ort
    from tiny_onnx import tiny_models

    with tempfile.TemporaryDirectory() as tmp:
        path = tiny_models(Path(tmp))["detector"]
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), sess_options=so,
                                       providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    feed = {inp.name: np.full([d if isinstance(d, int) else 1 for d in inp.shape], 0.5,
                              np.float32)}
    variants = callers(session, feed, module_of(against) if against else None)
    names = list(variants)
    for call in variants.values():
        block(call, 50)  # warm
    got: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            got[name].append(block(variants[name], calls))
    med = {n: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for n, v in got.items()}
    return {"calls_per_block": calls, "rounds": rounds,
            "per_block_us": {n: [[round(w, 1), round(c, 1)] for w, c in v] for n, v in got.items()},
            "median_wall_us": {n: round(w, 1) for n, (w, _) in med.items()},
            "median_cpu_us": {n: round(c, 1) for n, (_, c) in med.items()},
            "added_cpu_us_over_bare": {n: round(c - med["bare"][1], 1)
                                       for n, (_, c) in med.items() if n != "bare"},
            "added_wall_us_over_bare": {n: round(w - med["bare"][0], 1)
                                        for n, (w, _) in med.items() if n != "bare"}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=2000, help="calls a block")
    p.add_argument("--against", type=Path, help="another checkout's model_calls.py beside this one")
    p.add_argument("--json", default="", help="file name under docs/results/ ('': none)")
    args = p.parse_args()
    os.sched_setaffinity(0, [sorted(os.sched_getaffinity(0))[0]])
    out = {"machine": machine(), "load_before": loadavg(),
           "command": " ".join(["scripts/bench/model_call_cost.py", *sys.argv[1:]]),
           "results": bench(args.rounds, args.calls, args.against)}
    out["load_after"] = loadavg()
    res = out["results"]
    print(table([[n, res["median_wall_us"][n], res["median_cpu_us"][n],
                  res["added_cpu_us_over_bare"].get(n, "")] for n in res["median_wall_us"]],
                ["variant", "wall us/call", "CPU us/call", "CPU us added"]))
    if args.json:
        print(save_json(args.json, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
