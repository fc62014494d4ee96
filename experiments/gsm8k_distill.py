"""Noisy-teacher distillation on GSM8K with transformers models on TRL: BC vs OPD vs NAIL.

``python -m experiments.gsm8k_distill [--preset smoke|gpu] [options]``
(several GPUs: ``accelerate launch --multi_gpu --num_processes N -m experiments.gsm8k_distill ...``)

A teacher (``--teacher-model`` folder, or a tiny chat model built from a config and fine-tuned on
the train answers for ``--teacher-steps`` with TRL's ``SFTTrainer``) is made noisy by a
temperature or an ``eta`` mixture; students (``--student-model`` or the tiny model's untrained
weights, sharing the teacher's tokenizer) are trained with each method for the same steps,
prompts per step and prompt pool (:mod:`shiftbounds.distill.trainers`: BC by ``SFTTrainer`` on
fresh noisy-teacher samples, OPD and NAIL by TRL's ``DistillationTrainer`` with the noisy teacher
and the paper's losses), and scored by exact match of the final ``#### <number>`` under greedy
decoding on test problems. Each finished run is saved under ``runs/`` and skipped on a rerun;
``results.json`` / ``results.md`` / ``config.json`` follow the full pipeline's layout.

The smoke preset (tiny models, a handful of problems) checks the machinery in about a minute on a
CPU; its accuracies are 0 and mean nothing. The gpu preset documents a 0.5-1.5B run:
``--teacher-model`` / ``--student-model`` local chat-model folders (e.g. a 1.5B teacher and a 0.5B
student of one family), 16 prompts per step, 384 new tokens, 500 steps per method;
``--estimate-only`` prints the expected device memory (:mod:`shiftbounds.utils.memory`) without
loading weights.
"""

from __future__ import annotations

from shiftbounds.distill.study import GSM8KConfig, memory_estimate, run
from shiftbounds.utils.cli import exit_on_stale, parse_config
from shiftbounds.utils.io import markdown_table
from shiftbounds.utils.memory import format_estimate

PRESETS = {
    "smoke": {"methods": ("bc", "opd-F", "nail-F", "nail-Mixed"), "etas": (0.0, 0.2), "n_train": 16, "n_test": 8,
              "steps": 3, "batch": 2, "max_new": 24, "teacher_steps": 5, "d_model": 32, "n_layer": 1},
    "gpu": {"etas": (0.0, 0.1, 0.2), "seeds": 2, "n_train": 7473, "n_test": 1319, "steps": 500, "batch": 16,
            "max_new": 384, "lr": 1e-5, "teacher_steps": 0},
}


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_config(GSM8KConfig, __doc__, {"default": {}, **PRESETS}, argv, name="experiments.gsm8k_distill")
    if cfg.estimate_only:
        est = memory_estimate(cfg)
        print(format_estimate(est))
        return est
    results = exit_on_stale(run, cfg)
    print(markdown_table(results["rows"]))
    return results


if __name__ == "__main__":
    main()
