"""The device-memory estimate (shiftbounds.utils.memory): its exact parts against real tensors."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from shiftbounds.utils.memory import GIB, ModelShape, Stage, estimate, format_estimate, model_shape, stage_bytes

GQA = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
           num_key_value_heads=2)


def test_model_shape_counts_parameters_without_weights(tmp_path):
    cfg = LlamaConfig(**GQA)
    cfg.save_pretrained(tmp_path)  # a folder with config.json alone: no weights are read
    shape = model_shape(tmp_path)
    model = LlamaForCausalLM(cfg)
    assert shape == ModelShape(sum(p.numel() for p in model.parameters()), 3, 64, 2 * 16, 300)
    with pytest.raises(ValueError, match="no config.json"):
        model_shape(tmp_path / "missing")


def test_weights_gradients_and_adamw_state_are_exact():
    model = LlamaForCausalLM(LlamaConfig(**GQA))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(input_ids=torch.zeros(2, 5, dtype=torch.long), labels=torch.zeros(2, 5, dtype=torch.long)).loss.backward()
    opt.step()
    held = sum(p.nbytes + p.grad.nbytes for p in model.parameters())
    held += sum(t.nbytes for s in opt.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
    parts = stage_bytes(Stage("train", trained=model_shape(model.config)))
    assert parts["weights"] + parts["gradients + AdamW moments"] == held


def test_key_value_cache_is_exact():
    model = LlamaForCausalLM(LlamaConfig(**GQA)).eval().to(torch.bfloat16)
    with torch.no_grad():
        out = model(input_ids=torch.zeros(5, 11, dtype=torch.long), use_cache=True)
    cache = out["cache"] if "cache" in out else out["past_key_values"]
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    shape = model_shape(model.config)
    assert stage_bytes(Stage("gen", gen=shape, gen_batch=5, gen_len=11))["key-value cache"] == held


def test_peak_is_the_largest_stage_and_training_never_overlaps_generation():
    m = ModelShape(1000, 2, 8, 8, 50)
    train = Stage("train", (m,), m, train_batch=2, train_len=3, gen=m, gen_batch=100, gen_len=100)
    parts = stage_bytes(train)
    transient = max(parts["logits of a training step"] + parts["activations of a training step"], parts["key-value cache"])
    assert parts["peak"] == parts["weights"] + parts["gradients + AdamW moments"] + transient == 8000 + 12000 + 4 * 2 * 8 * 10_000
    ck = stage_bytes(Stage("ck", trained=ModelShape(1000, 24, 8, 8, 50), train_batch=1, train_len=1, checkpointing=True))
    full = stage_bytes(Stage("full", trained=ModelShape(1000, 24, 8, 8, 50), train_batch=1, train_len=1))
    assert ck["activations of a training step"] < full["activations of a training step"]
    est = estimate([Stage("small", (m,)), train])
    assert est["peak_stage"] == "train" and est["peak_gib"] == pytest.approx(parts["peak"] / GIB)
    assert "| train |" in format_estimate(est) and "not a measurement" in format_estimate(est)
    with pytest.raises(ValueError, match="gen_len must be >= 0; got -1"):
        Stage("bad", gen_len=-1)
    with pytest.raises(ValueError, match="at least one stage"):
        estimate([])


def test_estimate_only_entry_points_load_no_data(tmp_path, capsys):
    from experiments import gsm8k_distill, real_dialogue

    LlamaConfig(**GQA).save_pretrained(tmp_path / "m")
    rd = real_dialogue.main(["--preset", "gpu", "--estimate-only", "--base-model", str(tmp_path / "m"),
                             "--data-dir", str(tmp_path / "no-data-here")])
    assert rd["peak_stage"].startswith("GRPO") and rd["peak_gib"] > 0
    gs = gsm8k_distill.main(["--preset", "gpu", "--estimate-only", "--data-dir", str(tmp_path / "no-data-here")])
    assert set(gs["stages"]) == {"distillation (teacher + student)"}
    assert "Peak:" in capsys.readouterr().out


def test_model_folders_are_checked_at_the_command_line(tmp_path, capsys):
    from experiments import gsm8k_distill, real_dialogue

    with pytest.raises(SystemExit):
        real_dialogue.main(["--estimate-only", "--base-model", str(tmp_path / "nope")])
    assert "--base-model must be a local model folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gsm8k_distill.main(["--teacher-model", str(tmp_path)])
    assert "--teacher-model must be a local model folder" in capsys.readouterr().err
