"""Export a run's centre as a plain Hugging Face model directory plus its best prompt.

The weights are the last snapshot plus the weight updates logged after it, replayed in the driver with the
same noise as the workers; the result is checked against the checksum the run recorded (when it recorded one
for that generation). ``out/`` then holds ``model.safetensors``, ``config.json`` and the tokenizer files (what
``transformers.AutoModelForCausalLM.from_pretrained(out)`` loads), ``best_prompt.json`` (the most probable
genome's texts), ``prompt_pools.json`` and ``esopt_export.json`` (provenance, and the SHA-256 of
``model.safetensors``, which ``esopt eval --export`` checks).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cotrain.checkpoint import RunDir, RunState, atomic_write_json
from cotrain.errors import CheckpointError, RunDirError
from cotrain.integrity import sha256_file

EXPORT_FORMAT = "esopt-export/1"


def best_prompt(state: RunState) -> dict[str, Any]:
    """The most probable genome of ``state``: variant ids, indices, texts and the rendered system message."""
    ids = state.distribution.most_probable_prompt_ids()
    genome = state.pools.from_indices(ids)
    probs = state.distribution.prompt_probs
    return {
        "generation": state.generation,
        "prompt_ids": list(ids),
        "genome": genome.ids,
        "texts": {slot: genome.variant(slot).text for slot in state.pools.slot_names},
        "probabilities": {slot: float(p[i])
                          for slot, p, i in zip(state.pools.slot_names, probs, ids, strict=True)},
        "system_prompt": genome.system_text(),
        "observation_template": state.pools.observation_template,
    }


def centre_model(run: RunDir, state: RunState) -> tuple[Any, Any, str]:
    """The centre's model and tokenizer, rebuilt in this process, and its weight checksum."""
    from es_agent.perturb import apply_update, weights_checksum
    from es_agent.worker import load_agent_model

    spec = dataclasses.replace(run.config.agent,
                               snapshot=str(state.snapshot) if state.snapshot is not None else None)
    model, tokenizer = load_agent_model(spec)
    for _, update in state.pending:
        apply_update(model, update.seeds, update.coeffs, **spec.perturb_kwargs())
    checksum = weights_checksum(model)
    if state.checksum is not None and checksum != state.checksum:
        raise CheckpointError(f"rebuilt centre of {run.path} has checksum {checksum[:12]}, the run recorded "
                              f"{state.checksum[:12]} for generation {state.generation}")
    return model, tokenizer, checksum


def export_run(run_dir: str | Path, out_dir: str | Path) -> Path:
    """Write the export of ``run_dir`` into ``out_dir`` (absent or empty); returns ``out_dir``."""
    from cotrain.trainer import check_models

    run = RunDir.open(run_dir)
    state = run.load_state()
    check_models(run.config)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirError(f"export directory {out} exists and is not empty")
    model, tokenizer, checksum = centre_model(run, state)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(tmp / "best_prompt.json", best_prompt(state))
        atomic_write_json(tmp / "prompt_pools.json", state.pools.to_dict())
        weights = tmp / "model.safetensors"
        atomic_write_json(tmp / "esopt_export.json", {
            "format": EXPORT_FORMAT, "run_dir": str(run.path.resolve()), "generation": state.generation,
            "checksum": checksum, "base_model": run.config.agent.model,
            "snapshot_generation": state.snapshot_generation, "replayed_updates": len(state.pending),
            "sha256": sha256_file(weights) if weights.is_file() else None})
        os.chmod(tmp, 0o755)
        if out.exists():
            out.rmdir()
        os.rename(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out
