#!/usr/bin/env bash
# One command that measures everything GPU-dependent on a machine with one GPU, in under 8 minutes:
#   1. the main job's smoke preset on the GPU and on the CPU, and their agreement (the gpu test);
#   2. the gpu presets of the experiments at reduced size (full_pipeline, modadd, and real_dialogue: SmolLM2-135M
#      agent and users with LoRA, or SmolLM2's architecture with random weights where the model folder is absent);
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
  REAL=(--preset gpu --seeds 0,1 --rl-steps 4 --sft-steps 20 --user-steps 20 --n-eval 32 --n-probe 32 --n-disc 64
        --classifier-steps 10 --independent-pretrain-steps 20 --n-dialogues 400 --n-tm3 200 --curve-every 0)
  LAYERS=30
  SMOL="${SMOLLM2_DIR:-$("$PY" -c 'from shiftbounds.conversations.pretrained import SMOLLM2, cache_home; print(cache_home() / SMOLLM2.name)')}"
else
  SMALL=(--preset smoke --seeds 2 --rl-steps 4)
  MODADD=(--preset smoke --steps 4 --teacher-steps 8)
  REAL=(--preset smoke --lora-rank 2 --arms interactive_prompted --curve-every 0 --curve-users "")
  LAYERS=2
  SMOL="$OUT/no_model_here"  # the dry run always takes the random-weights stand-in
fi
log "2a. full_pipeline gpu preset, reduced"
"$PY" -m experiments.full_pipeline "${SMALL[@]}" --device "$DEVICE" --out-dir "$OUT/full_pipeline" > "$OUT/full_pipeline.txt"
log "2b. modadd paper preset, reduced"
"$PY" -m experiments.modadd "${MODADD[@]}" --device "$DEVICE" --out-dir "$OUT/modadd" > "$OUT/modadd.txt"
log "2c. real_dialogue gpu preset (SmolLM2 agent and users, LoRA), reduced"
if [ ! -f "$SMOL/config.json" ]; then
  log "    no SmolLM2 folder at $SMOL: SmolLM2's architecture with random weights, $LAYERS layers (speed, memory, utilisation; not its behaviour)"
  SMOL="$OUT/smollm2_random"
  "$PY" -c "import sys; from shiftbounds.conversations.pretrained import random_smollm2; random_smollm2(sys.argv[1], ['one hot mocha please', 'can i get a large iced latte with oat milk'] * 50, n_layer=int(sys.argv[2]))" "$SMOL" "$LAYERS"
fi
"$PY" -m experiments.real_dialogue "${REAL[@]}" --base-model "$SMOL" --out-dir "$OUT/real_dialogue" > "$OUT/real_dialogue.txt"
log "3. transformers benchmark (GPU half when a GPU is present)"
if [ "$DEVICE" = cuda ]; then
  "$PY" -m benchmarks.llm --batch 32 --new 128 --repeats 3 --out-dir "$OUT/benchmark_llm" > "$OUT/benchmark_llm.txt"
else
  "$PY" -m benchmarks.llm --preset smoke --out-dir "$OUT/benchmark_llm" > "$OUT/benchmark_llm.txt"
fi
log "done"
