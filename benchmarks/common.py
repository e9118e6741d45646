"""Shared pieces of the benchmark suite: the figure record, repeats and spreads, thread control, machine
information, the models and observations the benchmarks run on, and peak-RSS measurement of a workload in its
own subprocess.

Figures. Every benchmark's ``main(quick) -> list[dict]`` returns figures ``{name, value, unit, goal, met,
spread}`` (:class:`Figure`); ``spread`` is ``{"min", "max", "n"}`` over the repetitions (``None`` when the
figure is computed, not measured), ``goal`` is a string or ``None`` and ``met`` is ``None`` for reference
figures. On this shared 2-core machine absolute timings are noisy, so goals are stated as ratios of two things
measured side by side in the same run wherever possible.

Peak RSS. :func:`run_isolated` runs ``module:function(**kwargs)`` in a fresh Python process
(``python -m benchmarks.common``). The function calls :meth:`PhaseRSS.start` after its setup (imports, model
load) and :meth:`PhaseRSS.stop` after the measured phase: ``start`` resets the kernel's high-water mark
(``echo 5 > /proc/self/clear_refs``), so ``stop`` reads the peak resident set size of the phase alone from
``VmHWM`` (model weights included, since they are resident; transient peaks of model loading excluded). Where
the reset is not allowed the process's lifetime ``ru_maxrss`` is used instead, and the result says so.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository root (benchmarks run with it as the working directory and on ``sys.path``)."""
GB = 1024**3
MB = 1024**2


class BenchmarkError(RuntimeError):
    """A benchmark workload failed (its message carries the end of the child's output)."""


# ------------------------------------------------------------------------------------------------- figures

@dataclass
class Figure:
    """One measured or derived number of a benchmark."""

    name: str
    """What was measured, with the model and setting in brackets."""
    value: float | None
    """The figure (``None`` when skipped)."""
    unit: str
    """Unit of ``value`` (``GB``, ``s``, ``x`` for ratios, ``%``...)."""
    goal: str | None = None
    """The goal as text (``None``: a reference figure)."""
    met: bool | None = None
    """Whether the goal is met (``None``: no goal, or skipped)."""
    spread: dict[str, Any] | None = None
    """Spread over repetitions: ``{"min", "max", "n"}`` (``None`` for computed figures)."""
    note: str = ""
    """How to read the figure (method details, why a goal is missed)."""
    skipped: str | None = None
    """Why the figure was not measured (``None`` when it was)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Further numbers behind the figure (components, inputs)."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        extra = out.pop("extra")
        if not out["note"]:
            out.pop("note")
        if out["skipped"] is None:
            out.pop("skipped")
        if extra:
            out["extra"] = extra
        return out


def rnd(value: float | None, digits: int = 4) -> float | None:
    """``value`` rounded to ``digits`` significant digits (``None`` stays ``None``)."""
    if value is None or not math.isfinite(value) or value == 0:
        return value
    return round(value, max(0, digits - 1 - int(math.floor(math.log10(abs(value))))))


def spread(values: Sequence[float], digits: int = 4) -> dict[str, Any]:
    """``{"min", "max", "n"}`` of repeated measurements (plus ``stdev`` from three on)."""
    out: dict[str, Any] = {"min": rnd(min(values), digits), "max": rnd(max(values), digits), "n": len(values)}
    if len(values) >= 3:
        out["stdev"] = rnd(statistics.stdev(values), digits)
    return out


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def measured(name: str, values: Sequence[float], unit: str, *, goal: str | None = None,
             ok: Callable[[float], bool] | None = None, note: str = "", digits: int = 4,
             **extra: Any) -> Figure:
    """A figure from repeated measurements: the median, its spread and ``met = ok(median)``."""
    value = median(values)
    return Figure(name, rnd(value, digits), unit, goal, None if ok is None else bool(ok(value)),
                  spread(values, digits), note, None, extra)


def skipped(name: str, reason: str, unit: str = "", goal: str | None = None) -> Figure:
    """A figure that was not measured here, and why."""
    return Figure(name, None, unit, goal, None, None, "", reason)


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(wall seconds, process CPU seconds, result)`` of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def print_figures(title: str, figures: Sequence[dict[str, Any]]) -> None:
    print(title)
    for f in figures:
        if f.get("skipped"):
            print(f"  {f['name']}: skipped ({f['skipped']})")
            continue
        extra = "" if not f.get("spread") else f"  spread {f['spread']}"
        print(f"  {f['name']}: {f['value']} {f['unit']}{extra}  goal {f.get('goal')}  met={f.get('met')}")


# ------------------------------------------------------------------------------------------------- machine

@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """``torch.set_num_threads(n)`` for the block (one thread per worker, as the design has it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) * 1024 / GB, 1)
    except OSError:
        pass
    return None


def machine_info() -> dict[str, Any]:
    """Platform, CPU, memory, library versions, accelerator and load average."""
    info: dict[str, Any] = {
        "hostname": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
        "cpu": _cpu_model(), "cpu_count": os.cpu_count(), "mem_total_gb": _mem_total_gb(),
        "load_average": load_average(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:  # pragma: no cover
        info["torch"] = None
    for name in ("transformers", "ray", "evotorch"):
        try:
            info[name] = importlib.import_module(name).__version__
        except ImportError:  # pragma: no cover
            info[name] = None
    return info


# -------------------------------------------------------------------------------------------------- models

QWEN_05B_CONFIG: dict[str, Any] = dict(
    hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
    num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=32768,
    rope_theta=1_000_000.0, rms_norm_eps=1e-6,
)
"""Qwen2.5-0.5B's architecture (494M parameters with tied embeddings)."""
MODELS = ("tiny", "embedded", "qwen0.5b")
"""Models of the suite: the tests' tiny Qwen, the embedded SmolLM2-135M and a Qwen2.5-0.5B-shaped model."""


def embedded_tokenizer() -> Any:
    """The embedded model's tokenizer (SmolLM2, vocabulary 49152), read from the converted cache."""
    from transformers import AutoTokenizer

    from es_agent.models import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path("embedded"), local_files_only=True)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def qwen_05b(dtype: torch.dtype | None = None, device: str = "cpu", seed: int = 0) -> tuple[Any, Any]:
    """A randomly filled Qwen2.5-0.5B-shaped causal LM and the embedded tokenizer (its token ids fit).

    Built without transformers' weight init (``no_init_weights``), then filled in place: uniform noise of
    std 0.02 for matrices (six times faster than ``normal_`` on this CPU), ones for norms, zeros for biases.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers < 5
        from transformers.modeling_utils import no_init_weights

    tok = embedded_tokenizer()
    config = Qwen2Config(**QWEN_05B_CONFIG, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         bos_token_id=None)
    dtype = dtype or torch.float32
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # allocate in the target dtype (a later .to() would copy every tensor)
    try:
        with no_init_weights():
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model.lm_head.weight = model.model.embed_tokens.weight
    gen = torch.Generator().manual_seed(seed)
    random_init_(model, gen)
    model.to(device=device, dtype=dtype)
    model.eval()
    return model, tok


def load_bench_model(name: str, dtype: torch.dtype | None = None, device: str = "cpu") -> tuple[Any, Any]:
    """One of :data:`MODELS` as ``(model, tokenizer)``, in eval mode."""
    import torch

    dtype = dtype or torch.float32
    if name == "tiny":
        from es_agent.tiny import tiny_qwen

        model, tok = tiny_qwen(seed=0)
        return model.to(device=device, dtype=dtype).eval(), tok
    if name == "embedded":
        from es_agent.models import load_model

        return load_model("embedded", dtype=dtype, device=device)
    if name == "qwen0.5b":
        return qwen_05b(dtype, device)
    raise ValueError(f"unknown benchmark model {name!r}; expected one of {MODELS}")


def param_count(model: Any) -> int:
    """Parameters of ``model`` (tied tensors once)."""
    return sum(p.numel() for p in model.parameters())


def weight_bytes(model: Any) -> int:
    """Bytes of the model's parameters (tied tensors once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


# ---------------------------------------------------------------------------------------------- observations

_ROLES = ("link", "button", "StaticText", "StaticText", "textbox", "heading", "cell", "row", "combobox",
          "menuitem", "img", "checkbox")
_WORDS = ("order", "customer", "product", "price", "review", "shipping", "status", "pending", "complete",
          "total", "address", "email", "quantity", "invoice", "category", "rating", "date", "forum", "post",
          "comment", "account", "cart", "search", "page", "filter", "export", "store", "grid", "view")


def synthetic_observation(seed: int, lines: int = 260) -> dict[str, str]:
    """A WebArena-style observation whose accessibility tree (``lines`` nodes, about 3,000 tokens of the
    embedded tokenizer for 260 lines) resembles an admin grid page; the policy truncates it to its prompt
    budget (1,024 tokens by default), which is what a real listing page gives too."""
    rng = random.Random(seed)
    tree = ["[1] RootWebArea 'Orders / Sales / Magento Admin' focused: True"]
    for i in range(2, lines + 2):
        role = rng.choice(_ROLES)
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))
        props = " required: False" if role == "textbox" else ""
        name = f"{words.title()} {rng.randint(1, 9999)}"
        tree.append("\t" * rng.randint(1, 4) + f"[{i}] {role} '{name}'{props}")
    return {"axtree": "\n".join(tree), "url": f"http://127.0.0.1:7780/admin/sales/order/?p={seed}",
            "goal": "How many pending orders does the customer Emma Lopez have?",
            "tabs": "Tab 0 (current): Orders / Sales / Magento Admin", "last_action_error": ""}


def recorded_trajectory(steps: int, seed: int = 0) -> list[tuple[dict[str, str], str]]:
    """``steps`` (observation, action) pairs of a recorded episode on synthetic pages."""
    actions = ("click [17]", "type [42] [Emma Lopez] [1]", "click [88]", "scroll [down]", "stop [3]")
    return [(synthetic_observation(seed * 1000 + k), actions[k % len(actions)]) for k in range(steps)]


# ----------------------------------------------------------------------------------------------- peak RSS

def _status_kb(field_name: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


class PhaseRSS:
    """Peak resident set size of one phase of this process (see the module docstring)."""

    def __init__(self) -> None:
        self.method = "VmHWM after clear_refs reset"
        self.start_bytes = 0
        self.started = 0.0

    def start(self) -> None:
        gc.collect()
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            self.method = "ru_maxrss (process lifetime: the high-water mark could not be reset)"
        self.start_bytes = (_status_kb("VmRSS") or 0) * 1024
        self.started = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        hwm = _status_kb("VmHWM")
        if hwm is None or not self.method.startswith("VmHWM"):
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        else:
            peak = hwm * 1024
        return {"peak_bytes": peak, "start_bytes": self.start_bytes, "rss_method": self.method,
                "phase_seconds": round(time.perf_counter() - self.started, 2)}


def run_isolated(target: str, kwargs: dict[str, Any], *, timeout: float = 1200.0) -> dict[str, Any]:
    """Run ``target`` (``"module:function"``) with ``kwargs`` (JSON-safe) in a fresh Python process and
    return its result dict, plus ``ru_maxrss_bytes``, the child's lifetime peak RSS. Raises
    :class:`BenchmarkError` with the end of the child's output when it fails or times out."""
    with tempfile.TemporaryDirectory(prefix="esopt-bench-") as folder:
        out = Path(folder) / "result.json"
        cmd = [sys.executable, "-m", "benchmarks.common", "--call", target, "--kwargs", json.dumps(kwargs),
               "--out", str(out)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        try:
            proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise BenchmarkError(f"{target}({kwargs}) timed out after {timeout:.0f} s") from exc
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stdout[-1500:] + "\n" + proc.stderr[-3000:]).strip()
            raise BenchmarkError(f"{target}({kwargs}) failed with exit status {proc.returncode}:\n{tail}")
        return json.loads(out.read_text())


def _child_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one benchmark workload (used by run_isolated)")
    parser.add_argument("--call", required=True, help="module:function")
    parser.add_argument("--kwargs", default="{}", help="keyword arguments as JSON")
    parser.add_argument("--out", required=True, help="where to write the result as JSON")
    args = parser.parse_args(argv)
    module, _, name = args.call.partition(":")
    fn = getattr(importlib.import_module(module), name)
    result = dict(fn(**json.loads(args.kwargs)))
    result["ru_maxrss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child_main())


def run_as_script(main: Callable[[bool], list[dict[str, Any]]], doc: str, quick_help: str) -> None:
    """The command line of a benchmark module: ``python -m benchmarks.bench_X [--quick] [--json]``."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    result = main(args.quick)
    if args.json:
        print(json.dumps(result, indent=1))


def random_init_(model: Any, gen: Any) -> None:
    """Fill a model's weights in place with the benchmarks' random init: matrices uniform with std 0.02
    (drawn from ``gen``), norm weights 1, other vectors 0."""
    import torch

    bound = 0.02 * math.sqrt(3.0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                p.uniform_(-bound, bound, generator=gen)
            elif "norm" in name:
                p.fill_(1.0)
            else:
                p.zero_()


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=REPO_ROOT).stdout


def code_version(commit: str = "HEAD") -> str:
    """The git tree id of ``es_agent/`` at ``commit``; for ``HEAD``, plus ``+`` and a digest of the
    uncommitted changes under ``es_agent/`` when there are any. :class:`BenchmarkError` outside a git
    checkout (the cache key needs a version)."""
    try:
        tree = _git("rev-parse", f"{commit}:es_agent").strip()
        if commit != "HEAD":
            return tree[:12]
        diff = _git("diff", "HEAD", "--", "es_agent")
        untracked = _git("ls-files", "--others", "--exclude-standard", "--", "es_agent").split()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BenchmarkError(f"cannot read the version of es_agent/ at {commit!r}: {exc}") from exc
    if not diff and not untracked:
        return tree[:12]
    digest = hashlib.sha256(diff.encode())
    for name in sorted(untracked):
        digest.update(name.encode() + b"\0" + (REPO_ROOT / name).read_bytes())
    return f"{tree[:12]}+{digest.hexdigest()[:8]}"
