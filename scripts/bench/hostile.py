"""What hostile input costs in memory: a labels pickle bomb, a worker meeting a pixel bomb.

- Labels: `load_labels` on each crafted file (tests/test_hostile.py's bombs) in a fresh process,
  against the same process loading a small real-shaped labels file; and a labels file shaped like
  CSL-Daily's (20,654 videos), to show the bound holds for what the corpus really ships.
- Pixel bomb: the README's command (`phoenix-keypoints run --dataset D --out R`, default options)
  on a tiny PHOENIX tree, once as it is and once with one frame replaced by a 390 KB PNG of 20000 x
  20000 pixels; and once more with `--max-pixels` above the bomb, to show what decoding it would
  cost. Peak RSS is the kernel's high-water mark of the run's process tree (coordinator and workers).

    .venv/bin/python scripts/bench/hostile.py [--save hostile.json]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "tests")]
from common import REPO, machine, measure, save_json, table  # noqa: E402

LOAD = """import sys, time
from pathlib import Path
from extract.corpora.csl_daily import load_labels
t = time.perf_counter()
try:
    load_labels(Path(sys.argv[1]))
except Exception as e:
    print(str(e)[:160])
print(f"took {time.perf_counter() - t:.2f} s")"""


def csl_like_labels(n: int = 20654) -> bytes:
    """A labels pickle of CSL-Daily's shape: per video its glosses, characters and words."""
    info = [{"name": f"S{i:06d}_P{i % 10:04d}_T00", "length": 100 + i % 200, "signer": i % 10,
             "label_gloss": ["你", "好", "谢谢", "再见"] * 3, "label_char": list("你好谢谢再见。" * 2),
             "label_word": ["你好", "谢谢", "再见", "。"] * 2} for i in range(n)]
    return pickle.dumps({"info": info, "gloss_map": ["你", "好", "谢谢", "再见"]}, protocol=4)


def labels_rows(work: Path) -> list[dict]:
    from test_hostile import LABEL_BOMBS

    files = {"small real-shaped (baseline)": pickle.dumps({"info": [{"name": "a"}]}, protocol=2),
             "CSL-Daily-shaped, 20,654 videos": csl_like_labels(),
             **{name: data for name, data, _ in LABEL_BOMBS}}
    out = []
    for name, data in files.items():
        path = work / "labels.pkl"
        path.write_bytes(data)
        m = measure([sys.executable, "-c", LOAD, str(path)])
        out.append({"file": name, "bytes": len(data), "peak_rss_mib": m["peak_rss_mib_kernel"],
                    "said": " ".join(m["output"])[:160]})
    base = out[0]["peak_rss_mib"]
    for r in out:
        r["above_baseline_mib"] = round(r["peak_rss_mib"] - base, 1)
        r["bound_mib"] = round((10 * r["bytes"]) / 2**20 + 100, 1)  # the target: 10 x size + 100 MB
    return out


def pixel_rows(work: Path) -> list[dict]:
    from kinds import phoenix_t
    from test_hostile import SIGNER, png_bomb

    out = []
    for name, bomb, extra in (("as shipped", False, []), ("one frame a 20000x20000 PNG", True, []),
                              ("the same, --max-pixels 500000000 (decoded)", True,
                               ["--max-pixels", "500000000"])):
        root = phoenix_t(work / f"t{len(out)}")
        if bomb:
            (root / SIGNER / "images0002.png").write_bytes(png_bomb())
        cmd = [sys.executable, "-m", "jobs.cli", "run", "--dataset", str(root), "--out",
               str(work / f"r{len(out)}"), *extra]
        m = measure(cmd, tree=True)
        out.append({"input": name, "command": "phoenix-keypoints run --dataset D --out R "
                    + " ".join(extra), "peak_rss_mib": m["peak_rss_mib_kernel"],
                    "wall_s": m["wall_s"]})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--save", help="results file name under docs/results/")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        labels = labels_rows(Path(tmp))
        pixels = pixel_rows(Path(tmp))
    print(table([[r["file"], r["bytes"], r["peak_rss_mib"], r["above_baseline_mib"], r["bound_mib"],
                  r["said"][:70]] for r in labels],
                ["labels file", "bytes", "peak RSS MiB", "above baseline", "10x size + 100 MB",
                 "said"]))
    print()
    print(table([[r["input"], r["peak_rss_mib"], r["wall_s"]] for r in pixels],
                ["run on", "peak RSS MiB (largest process)", "wall s"]))
    if args.save:
        print(save_json(args.save, {"machine": machine(), "labels": labels, "pixel_bomb": pixels,
                                    "repo": str(REPO.name)}))


if __name__ == "__main__":
    main()
