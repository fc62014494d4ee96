"""Noisy-teacher distillation of language models on TRL (GSM8K): the noisy teacher and its
on-policy losses (:mod:`shiftbounds.distill.gsm8k`), behaviour cloning by ``SFTTrainer`` and
OPD / NAIL by a ``DistillationTrainer`` subclass (:mod:`shiftbounds.distill.trainers`)."""
