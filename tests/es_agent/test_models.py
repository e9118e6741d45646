"""Model loading: tiny models, local checkpoints, offline hub lookups, weight files and the embedded model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from es_agent import CheckpointMismatchError, ModelNotFoundError
from es_agent.models import (
    MANIFEST,
    cache_root,
    embedded_gguf_path,
    load_model,
    load_weights,
    save_weights,
)
from es_agent.tiny import tiny_qwen


def test_import_is_light() -> None:
    code = "import sys, es_agent; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_tiny_qwen_is_deterministic_and_leaves_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    model_a, tok_a = tiny_qwen(seed=0)
    assert torch.equal(torch.rand(1), expected_next)
    model_b, tok_b = tiny_qwen(seed=0)
    model_c, _ = tiny_qwen(seed=1)
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert any(not torch.equal(a, c) for a, c in zip(model_a.parameters(), model_c.parameters(), strict=True))
    assert tok_a.get_vocab() == tok_b.get_vocab()
    config = model_a.config
    assert (config.model_type, config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.num_key_value_heads, config.intermediate_size) == ("qwen2", 64, 2, 4, 2, 128)
    assert config.vocab_size == len(tok_a)
    assert not model_a.training


def test_tiny_tokenizer_round_trips_and_renders_chatml(tiny: tuple[Any, Any]) -> None:
    _, tok = tiny
    text = "\t[1234] link 'Customers'\nstop [$12.00] \u00e9\u00e8 \u4e2d"
    assert tok.decode(tok(text, add_special_tokens=False).input_ids) == text
    digits = tok.convert_ids_to_tokens(tok("click [1234]", add_special_tokens=False).input_ids)
    assert digits[-5:] == ["1", "2", "3", "4", "]"]
    rendered = tok.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
                                       tokenize=False, add_generation_prompt=True)
    assert rendered == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
                        "<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token is not None


def test_tiny_qwen_overrides() -> None:
    model, _ = tiny_qwen(seed=0, num_hidden_layers=1, hidden_size=32, intermediate_size=64)
    assert model.config.num_hidden_layers == 1 and model.config.hidden_size == 32


def test_load_model_round_trip(tiny: tuple[Any, Any], tiny_dir: Path) -> None:
    model, tok = tiny
    loaded, loaded_tok = load_model(tiny_dir)
    assert not loaded.training
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    ids = torch.tensor([tok("click [12]").input_ids])
    with torch.inference_mode():
        assert torch.allclose(model(ids).logits, loaded(ids).logits)
    assert loaded_tok("type [5] [mouse]").input_ids == tok("type [5] [mouse]").input_ids
    assert loaded_tok.chat_template == tok.chat_template


def test_load_model_dtype(tiny_dir: Path) -> None:
    model, _ = load_model(tiny_dir, dtype=torch.bfloat16)
    assert next(model.parameters()).dtype == torch.bfloat16


@pytest.mark.parametrize("spec", ["no-such-model", "/nonexistent/model/dir", "nobody/not-cached-xyz"])
def test_unknown_spec_raises_model_not_found(spec: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    started = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="not|unknown"):
        load_model(spec)
    assert time.perf_counter() - started < 10  # no network attempt that hangs


def test_directory_without_config_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="config.json"):
        load_model(tmp_path)


def test_expect_config_refuses_other_architecture(tiny_dir: Path) -> None:
    with pytest.raises(CheckpointMismatchError, match="hidden_size=64, expected 128"):
        load_model(tiny_dir, expect_config={"hidden_size": 128})
    other, _ = tiny_qwen(seed=0, num_hidden_layers=3)
    with pytest.raises(CheckpointMismatchError, match="num_hidden_layers"):
        load_model(tiny_dir, expect_config=other.config)
    model, _ = load_model(tiny_dir, expect_config={"model_type": "qwen2", "hidden_size": 64})
    assert model.config.hidden_size == 64


def test_checkpoint_with_wrong_shapes_raises(tiny_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in os.listdir(tiny_dir):
        (bad / name).write_bytes((tiny_dir / name).read_bytes())
    config = json.loads((bad / "config.json").read_text())
    config["intermediate_size"] = 96
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointMismatchError, match="mlp"):
        load_model(bad)


def test_load_weights_round_trip(tiny: tuple[Any, Any], tmp_path: Path) -> None:
    model, _ = tiny
    path = tmp_path / "w.safetensors"
    save_weights(model, path)
    other, _ = tiny_qwen(seed=5)
    load_weights(other, path)
    for a, b in zip(model.state_dict().values(), other.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert other.lm_head.weight.data_ptr() == other.model.embed_tokens.weight.data_ptr()  # still tied


def test_load_weights_refuses_mismatches(tiny: tuple[Any, Any], tmp_path: Path) -> None:
    model, _ = tiny
    path = tmp_path / "w.safetensors"
    save_weights(model, path)
    deeper, _ = tiny_qwen(seed=0, num_hidden_layers=3)
    with pytest.raises(CheckpointMismatchError, match=r"model\.layers\.2\.\S+ is missing"):
        load_weights(deeper, path)
    wider, _ = tiny_qwen(seed=0, intermediate_size=96)
    before = [p.clone() for p in wider.parameters()]
    with pytest.raises(CheckpointMismatchError, match=r"model\.layers\.0\.mlp\.\w+\.weight' has shape"):
        load_weights(wider, path)
    assert all(torch.equal(a, b) for a, b in zip(before, wider.parameters(), strict=True))  # untouched
    tensors = load_file(str(path))
    tensors["model.extra.weight"] = torch.zeros(2)
    save_file(tensors, str(tmp_path / "extra.safetensors"))
    with pytest.raises(CheckpointMismatchError, match="unexpected tensor 'model.extra.weight'"):
        load_weights(model, tmp_path / "extra.safetensors")
    with pytest.raises(ModelNotFoundError):
        load_weights(model, tmp_path / "missing.safetensors")


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ESOPT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "agentic-esopt"
    monkeypatch.setenv("ESOPT_CACHE", str(tmp_path / "esopt"))
    assert cache_root() == tmp_path / "esopt"
    monkeypatch.delenv("ESOPT_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "agentic-esopt"


@pytest.mark.slow
@pytest.mark.model
def test_embedded_model_converts_once_then_loads_from_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_obs: Any, pools: Any) -> None:
    try:
        embedded_gguf_path()
    except ModelNotFoundError as exc:
        pytest.skip(str(exc))
    from es_agent.policy import LLMPolicy, PolicyConfig

    torch.set_num_threads(1)
    monkeypatch.setenv("ESOPT_CACHE", str(tmp_path))
    started = time.perf_counter()
    load_model("embedded")
    first = time.perf_counter() - started
    converted = list((tmp_path / "gguf").iterdir())
    assert len(converted) == 1 and (converted[0] / MANIFEST).is_file()  # no temp leftovers
    assert (converted[0] / "model.safetensors").is_file()
    started = time.perf_counter()
    model, tok = load_model("embedded")
    cached = time.perf_counter() - started
    print(f"\nembedded SmolLM2: first load {first:.1f} s (conversion), cached load {cached:.1f} s")
    assert cached < first
    assert model.config.model_type == "llama" and model.config.hidden_size == 576
    assert not hasattr(model.config, "quantization_config")
    with torch.inference_mode():
        ids = torch.tensor([tok("The capital of France is").input_ids])
        logits = model(ids).logits
    assert torch.isfinite(logits).all()
    assert tok.decode(int(logits[0, -1].argmax())).strip() == "Paris"
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(max_prompt_tokens=512))
    obs = make_obs()
    action = policy.act(obs)
    assert action in policy.candidates(obs)


# ------------------------------------------------------------------------------------------ cheap checks


def _bad_specs(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "fake.gguf").write_bytes(b"not a gguf")
    (tmp_path / "list-config").mkdir()
    (tmp_path / "list-config" / "config.json").write_text("[1, 2]")
    (tmp_path / "no-weights").mkdir()
    (tmp_path / "no-weights" / "config.json").write_text('{"model_type": "qwen2"}')
    (tmp_path / "plain.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    return {"missing dir": str(tmp_path / "absent"), "uncached hub id": "nobody/not-cached-xyz",
            "a text file": str(tmp_path / "plain.txt"), "not a gguf": str(tmp_path / "fake.gguf"),
            "config not an object": str(tmp_path / "list-config"), "no weights": str(tmp_path / "no-weights"),
            "no config": str(tmp_path), "bad name": "no such model"}


def test_check_model_spec_refuses_what_cannot_load(tmp_path: Path, tiny_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from es_agent.models import check_model_spec

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for what, spec in _bad_specs(tmp_path).items():
        with pytest.raises(ModelNotFoundError):
            check_model_spec(spec)
        print(what, "refused")
    if Path("/etc/passwd").is_file():
        with pytest.raises(ModelNotFoundError, match="neither a checkpoint directory nor a .gguf"):
            check_model_spec("/etc/passwd")
    check_model_spec("tiny:0")
    check_model_spec(tiny_dir)


def test_check_device_refuses_unknown_and_absent_devices() -> None:
    from es_agent.errors import DeviceError
    from es_agent.models import check_device

    assert check_device("cpu") == torch.device("cpu")
    for bad, message in (("tpu9", "not a torch device"), ("meta", "unsupported device type"),
                         ("", "not a torch device")):
        with pytest.raises(DeviceError, match=message):
            check_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="'cuda' is not available on this machine"):
            check_device("cuda")
    else:
        with pytest.raises(DeviceError, match="cuda device"):
            check_device(f"cuda:{torch.cuda.device_count()}")


def test_agent_spec_refuses_a_device_string_torch_cannot_parse() -> None:
    from es_agent.specs import AgentSpec, SpecError

    with pytest.raises(SpecError, match="AgentSpec.device 'tpu9' is not a torch device"):
        AgentSpec(model="tiny:0", device="tpu9")
    assert AgentSpec(model="tiny:0", device="cuda:3").device == "cuda:3"  # availability: where it is built


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_load_model_on_an_absent_device_is_a_typed_error(tiny_dir: Path) -> None:
    from es_agent.errors import DeviceError

    with pytest.raises(DeviceError, match="'cuda' is not available"):
        load_model(tiny_dir, device="cuda")


@pytest.mark.parametrize("size", [0, 100], ids=["empty", "truncated"])
def test_unreadable_weights_are_typed_errors(tiny: tuple[Any, Any], tiny_dir: Path, tmp_path: Path,
                                             size: int) -> None:
    import shutil

    from es_agent.errors import CorruptWeightsError

    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:size])
    with pytest.raises(CorruptWeightsError, match="not readable"):
        load_model(broken)
    with pytest.raises(CorruptWeightsError, match=r"model\.safetensors is not a readable safetensors file"):
        load_weights(tiny[0], weights)
    weights.unlink()
    with pytest.raises(ModelNotFoundError, match="cannot load the checkpoint"):
        load_model(broken)
