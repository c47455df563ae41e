#!/usr/bin/env bash
# scripts/bench/gpu.py on a lent GPU machine that reaches no package index (issue 47), first time.
#
# That machine (one H200, 16 cores, Python 3.12 with numpy, pyarrow, OpenCV, onnx, pandas, tqdm,
# the CUDA 13 and cuDNN 9 nvidia-* wheels of its PyTorch, and the CPU onnxruntime) lacks only
# onnxruntime-gpu (~256 MB), the shared sample's frames and rtmlib. They travel in the checkout's
# git-ignored .gpu-node/: the wheel split into parts of at most 50 MiB, since one call carries at
# most 64 MiB with the working tree. Files a call carried stay there while the machine is warm
# (30 s after each call), so the parts are carried one call after another, each call running the
# same command, which says what it has and, once every part is there, joins them (sha256
# checked), installs onnxruntime-gpu beside the image's packages (pip --no-index --target), checks
# CUDA starts, and runs gpu.py (under 8 minutes), its JSON and log under $OUT.
#
#   here (PyPI reachable), once:   bash scripts/bench/gpu_device.sh prepare
#       writes .gpu-node/ and .gpu-node/CALLS.txt: the `carry` list of each call, in order
#   there, in each call:           bash scripts/bench/gpu_device.sh        (timeout_s 600)
#   then here:                     cp the returned gpu.json docs/results/gpu-h200-DATE.json
#
# A call whose parts are not all there yet exits 0 after its checks (nvidia-smi, Python, what the
# image has), printing `waiting for:` and the parts still missing; a call that finds a part of
# other bytes says which (carry it again). `bash scripts/bench/gpu_device.sh dry` runs gpu.py's
# path on the CPU here, tiny (what tests/test_bench_models.py checks of gpu.py). A rehearsal of the
# device call without a GPU: GPU_NODE=DIR (parts of a CPU onnxruntime wheel for this Python)
# REHEARSE=1 bash scripts/bench/gpu_device.sh: the same steps, gpu.py --device cpu --dry-run.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
NODE=${GPU_NODE:-.gpu-node}
REHEARSE=${REHEARSE:-}
SAMPLE=../shared/data/phoenix-sample/PHOENIX-2014-T
FRAMES=features/fullFrame-210x260px/train
PART_MB=50
LIMIT_MB=58  # what a call may carry besides the working tree (64 MiB in all)

prepare() {
    set -e
    rm -rf "$NODE" && mkdir -p "$NODE/wheels" "$NODE/data/phoenix-sample/PHOENIX-2014-T/$FRAMES"
    python3 scripts/gpu_install.py --wheelhouse "$NODE/wheels" --python-version 3.12 \
        --only-onnxruntime --split-mb "$PART_MB"
    for v in signer_demo-1 fingerspelling_hand-1; do
        cp -r "$SAMPLE/$FRAMES/$v" "$NODE/data/phoenix-sample/PHOENIX-2014-T/$FRAMES/"
    done
    mkdir -p "$NODE/rtmlib" && cp -r .venv/rtmlib-ref/rtmlib "$NODE/rtmlib/"
    find "$NODE" -name __pycache__ -prune -exec rm -rf {} +
    grep -qx "/$NODE/" .gitignore || { echo "$NODE/ must be in .gitignore"; exit 1; }
    python3 - "$NODE" "$LIMIT_MB" <<'EOF'
import json, sys
from pathlib import Path
node, limit = Path(sys.argv[1]), float(sys.argv[2]) * 2**20
size = lambda p: sum(f.stat().st_size for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
small = [node / "data", node / "rtmlib", *sorted(node.glob("wheels/*.parts.json"))]
parts = sorted(node.glob("wheels/*.part-*"), key=size)
calls, first = [], [*small]
while parts and size(parts[0]) + sum(map(size, first)) <= limit:
    first.append(parts.pop(0))
calls.append(first)
calls += [[p] for p in sorted(parts)]
lines = [json.dumps([str(p) for p in c]) + f"  # {sum(map(size, c)) / 2**20:.1f} MiB" for c in calls]
(node / "CALLS.txt").write_text("\n".join(lines) + "\n")
print(f"{len(calls)} calls, each `bash scripts/bench/gpu_device.sh` (timeout_s 600), carrying:")
print("\n".join(lines))
EOF
}

dry() {
    set -e
    python3 scripts/bench/gpu.py --device cpu --dry-run --json ''
}

device() {
    echo "== $(date -u +%FT%TZ) on $(hostname): $(nproc) cores"
    nvidia-smi --query-gpu=index,name,memory.total,memory.free,driver_version --format=csv \
        || echo "no nvidia-smi"
    python3 - <<'EOF'
import importlib.util, sys, sysconfig
print("python", sys.version.split()[0], sys.executable)
for m in ("numpy", "pyarrow", "cv2", "onnx", "onnxruntime", "pandas", "tqdm", "jinja2", "av"):
    spec = importlib.util.find_spec(m)
    print(f"  {m}: {'yes' if spec else 'MISSING'}")
lib = sysconfig.get_paths()["purelib"]
from pathlib import Path
print("  CUDA 13 libraries:", sorted(p.name for p in Path(lib, "nvidia/cu13/lib").glob("*.so.*"))[:8])
print("  cuDNN:", sorted(p.name for p in Path(lib, "nvidia/cudnn/lib").glob("libcudnn.so*")))
EOF
    local manifest missing
    manifest=$(ls "$NODE"/wheels/*.parts.json 2>/dev/null | head -1)
    if [ -z "$manifest" ]; then
        echo "waiting for: $NODE/wheels/*.parts.json (carry it with the first part)"; return 0
    fi
    missing=$(python3 -c "
import json, sys, pathlib
m = pathlib.Path(sys.argv[1]); j = json.loads(m.read_text())
print(' '.join(p['name'] for p in j['parts'] if not (m.parent / p['name']).is_file()))" "$manifest")
    if [ -n "$missing" ]; then
        echo "waiting for: $missing"; return 0
    fi
    [ -d "$NODE/data" ] && [ -d "$NODE/rtmlib" ] || { echo "waiting for: $NODE/data $NODE/rtmlib"; return 0; }
    python3 scripts/gpu_install.py --join "$NODE/wheels" || return 1
    local site=/tmp/site${REHEARSE:+-rehearsal}
    if [ ! -d "$site/onnxruntime" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target "$site" "$NODE"/wheels/onnxruntime*.whl || return 1
    fi
    export PYTHONPATH="$site:$PWD:$PWD/$NODE/rtmlib${PYTHONPATH:+:$PYTHONPATH}"
    [ -e ../shared/data ] || { mkdir -p ../shared && ln -sfn "$PWD/$NODE/data" ../shared/data; }
    python3 scripts/gpu_install.py --check || [ -n "$REHEARSE" ] || return 1
    local out="${OUT:-/tmp/gpu-out}" args=(--budget-s 380)
    [ -n "$REHEARSE" ] && args=(--device cpu --dry-run)
    mkdir -p "$out"
    PYTHONUNBUFFERED=1 timeout 540 python3 scripts/bench/gpu.py "${args[@]}" \
        --json "$out/gpu.json" 2>&1 | tee "$out/gpu.log"
    local rc=${PIPESTATUS[0]}
    echo "gpu.py exit $rc; files in $out: $(ls "$out")"
    return "$rc"
}

case "${1:-device}" in
    prepare) prepare ;;
    dry) dry ;;
    device) device ;;
    *) echo "usage: $0 [prepare|dry|device]"; exit 2 ;;
esac
