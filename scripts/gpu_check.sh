#!/usr/bin/env bash
# One command that measures everything GPU-dependent on a machine with one GPU, in under 8 minutes:
#   1. the main job's smoke preset on the GPU and on the CPU, and their agreement (the gpu test);
#   2. the gpu presets of the experiments at reduced size (full_pipeline, modadd);
#   3. the GPU half of the transformers benchmark (tokens/s, MFU against the device's peak).
# Outputs go under $OUT (default ./gpu_check_out). `scripts/gpu_check.sh --device cpu` is the dry
# run the tests use: the same steps, tiny sizes, on the CPU. $PYTHON names the interpreter (default: python).
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=cuda
if [ "${1:-}" = "--device" ]; then DEVICE="${2:?--device needs cpu or cuda}"; fi
case "$DEVICE" in cpu|cuda) ;; *) echo "--device must be cpu or cuda; got $DEVICE" >&2; exit 2 ;; esac
OUT="${OUT:-gpu_check_out}"
PY="${PYTHON:-python}"  # the interpreter to use: the tests pass their own (sys.executable), e.g. a venv's
mkdir -p "$OUT"
log() { echo "[gpu_check $(date +%H:%M:%S)] $*" | tee -a "$OUT/gpu_check.log"; }
log "device $DEVICE, out $OUT"
"$PY" -c "import torch, json; print(json.dumps({'torch': torch.__version__, 'cuda': torch.cuda.is_available(), 'device': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}))" | tee "$OUT/environment.json"
if [ "$DEVICE" = cuda ]; then
  log "1. CPU-vs-GPU agreement of the main job's smoke preset"
  "$PY" -m pytest -q -m gpu tests/test_gpu.py 2>&1 | tee "$OUT/gpu_tests.txt"
  SMALL=(--preset gpu --seeds 2 --rl-steps 300 --sft-steps 600 --n-logs 2000 --n-eval 4000)
  MODADD=(--preset paper --seeds 1 --steps 300 --teacher-steps 600 --etas 0.0,0.2 --methods bc,opd-F,nail-F)
else
  SMALL=(--preset smoke --seeds 2 --rl-steps 4)
  MODADD=(--preset smoke --steps 4 --teacher-steps 8)
fi
log "2a. full_pipeline gpu preset, reduced"
"$PY" -m experiments.full_pipeline "${SMALL[@]}" --device "$DEVICE" --out-dir "$OUT/full_pipeline" > "$OUT/full_pipeline.txt"
log "2b. modadd paper preset, reduced"
"$PY" -m experiments.modadd "${MODADD[@]}" --device "$DEVICE" --out-dir "$OUT/modadd" > "$OUT/modadd.txt"
log "3. transformers benchmark (GPU half when a GPU is present)"
if [ "$DEVICE" = cuda ]; then
  "$PY" -m benchmarks.llm --batch 32 --new 128 --repeats 3 --out-dir "$OUT/benchmark_llm" > "$OUT/benchmark_llm.txt"
else
  "$PY" -m benchmarks.llm --preset smoke --out-dir "$OUT/benchmark_llm" > "$OUT/benchmark_llm.txt"
fi
log "done"
