"""Typed, JSON-safe specs of what an ES worker builds (model, prompts, policy, env) and the records of the
update log that moves every replica's centre.

Specs hold plain values only (strings, numbers, tuples, dicts of them), so a Problem that carries them pickles
in a few kilobytes and ``to_dict()`` writes them into a run's config. Heavy objects (the model, the tokenizer,
the browser) are built from them inside each worker (:mod:`es_agent.worker`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal

from es_agent.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    import gymnasium as gym
    import torch

    from es_agent.perturb import ParamSelector
    from es_agent.policy import PolicyConfig
    from es_agent.prompts import PromptPools

DTYPES = ("float32", "bfloat16", "float16", "float64")
"""Concrete model dtypes; an :class:`AgentSpec` also accepts ``"auto"`` (:data:`AUTO_DTYPE`)."""
AUTO_DTYPE = "auto"
"""``AgentSpec.dtype`` that lets :func:`es_agent.hardware.choose_dtype` pick bf16 or fp32 for the device."""
TINY_PREFIX = "tiny:"
"""Model spec prefix of the tiny random Qwen of :mod:`es_agent.tiny` (``"tiny:<seed>"``)."""
DEFAULT_INFRA_ERRORS = (
    "webarena_gym.errors.BrowserError",
    "webarena_gym.errors.EvaluatorError",
    "ConnectionError",
    "TimeoutError",
)
"""Exception classes (dotted or bare class names) that count as infrastructure failures of an episode."""


def _json_safe(value: Any, where: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{where} must be JSON-serialisable (plain numbers, strings, lists, dicts): "
                        f"{exc}") from None


def _check_device_string(device: Any) -> None:
    """A device string torch parses (``cpu``, ``cuda:1``...); whether the machine has it is checked where the
    model is built (:func:`es_agent.models.check_device`), which may be another machine."""
    import torch

    if not isinstance(device, str) or not device:
        raise SpecError(f"AgentSpec.device must be a non-empty string, got {device!r}")
    try:
        torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise SpecError(f"AgentSpec.device {device!r} is not a torch device: {exc}") from None


@dataclass(frozen=True)
class AgentSpec:
    """What a worker builds to act: the model, its perturbation, the prompt pools and the policy."""

    model: str = "embedded"
    """``"embedded"`` (SmolLM2-135M-Instruct), a local checkpoint directory or ``.gguf`` file, a hub id in the
    local cache, or ``"tiny:<seed>"`` for the tiny random Qwen of :func:`es_agent.tiny.tiny_qwen`."""
    dtype: str = "float32"
    """Weight dtype, one of :data:`DTYPES`, or ``"auto"``: bf16 on a CPU with native bf16 (AMX or AVX512-BF16)
    and on CUDA, float32 elsewhere (:func:`es_agent.hardware.choose_dtype`). ``AgentProblem`` resolves
    ``"auto"`` once, in the driver (:meth:`resolved`), so that every replica gets the same dtype."""
    device: str = "cpu"
    """Device of the replica (``"cpu"``, ``"cuda"``, ``"cuda:0"``...)."""
    mode: Literal["full", "lowrank"] = "full"
    """Perturbation mode of :func:`es_agent.perturbed`: full-rank in place, or EGGROLL-style low rank."""
    rank: int | None = None
    """Rank of the low-rank noise (``lowrank`` only)."""
    params: tuple[str, ...] | None = None
    """Include globs over ``model.named_parameters()`` names; ``None`` selects every floating parameter."""
    params_exclude: tuple[str, ...] = ()
    """Globs removing names from the selection."""
    snapshot: str | None = None
    """A safetensors weights file (or folder of shards) loaded over the model: the centre at the start of the
    update log (resume, or a rebase after a checkpoint)."""
    prompt_pools: str | Mapping[str, Any] | None = None
    """Prompt pools: a JSON file path, the pools' JSON form inline, or ``None`` for the package default."""
    policy: Mapping[str, Any] = field(default_factory=dict)
    """:class:`~es_agent.policy.PolicyConfig` fields (``candidates`` as a dict of ``CandidateConfig``
    fields)."""
    torch_threads: int | None = 1
    """``torch.set_num_threads`` applied when the replica is built (one thread per worker is fastest on small
    CPUs); ``None`` leaves the process setting alone."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise SpecError(f"AgentSpec.model must be a non-empty string, got {self.model!r}")
        if self.model.startswith(TINY_PREFIX):
            tail = self.model[len(TINY_PREFIX):]
            if not tail.isdigit():
                raise SpecError(f"AgentSpec.model {self.model!r}: expected 'tiny:<integer seed>'")
        _check_device_string(self.device)
        if self.dtype not in (*DTYPES, AUTO_DTYPE):
            raise SpecError(f"AgentSpec.dtype must be one of {(*DTYPES, AUTO_DTYPE)}, got {self.dtype!r}")
        if self.mode not in ("full", "lowrank"):
            raise SpecError(f"AgentSpec.mode must be 'full' or 'lowrank', got {self.mode!r}")
        if self.mode == "lowrank" and (not isinstance(self.rank, int) or isinstance(self.rank, bool)
                                       or self.rank < 1):
            raise SpecError(f"AgentSpec.rank must be an integer >= 1 in lowrank mode, got {self.rank!r}")
        if self.mode == "full" and self.rank is not None:
            raise SpecError(f"AgentSpec.rank={self.rank} is meaningless in full mode (use mode='lowrank')")
        for name in ("params", "params_exclude"):
            value = getattr(self, name)
            if value is None and name == "params":
                continue
            if isinstance(value, str) or not all(isinstance(p, str) for p in value):
                raise SpecError(f"AgentSpec.{name} must be a sequence of glob strings, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        if self.params == ():
            raise SpecError("AgentSpec.params is empty: it would select nothing (None selects everything)")
        threads = self.torch_threads
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
            raise SpecError(f"AgentSpec.torch_threads must be a positive integer or None, got {threads!r}")
        pools = self.prompt_pools
        if pools is not None and not isinstance(pools, str | Mapping):
            raise SpecError(f"AgentSpec.prompt_pools must be a path, a dict or None, got "
                            f"{type(pools).__name__}")
        if isinstance(pools, Mapping):
            _json_safe(dict(pools), "AgentSpec.prompt_pools")
        if not isinstance(self.policy, Mapping):
            raise SpecError(f"AgentSpec.policy must be a dict of PolicyConfig fields, got {self.policy!r}")
        _json_safe(dict(self.policy), "AgentSpec.policy")
        self.policy_config()  # validates field names and values

    # ------------------------------------------------------------------ builders
    def torch_dtype(self) -> torch.dtype:
        """The model dtype as a ``torch.dtype`` (``"auto"`` resolved for :attr:`device` on this machine)."""
        import torch

        return getattr(torch, self.resolved().dtype)

    def resolved(self) -> AgentSpec:
        """This spec with a concrete dtype: ``"auto"`` chosen for :attr:`device` on this machine
        (:func:`es_agent.hardware.choose_dtype`); a spec with a concrete dtype is returned as is."""
        if self.dtype != AUTO_DTYPE:
            return self
        from es_agent.hardware import choose_dtype

        return replace(self, dtype=str(choose_dtype(self.dtype, self.device).value))

    def param_spec(self) -> ParamSelector | None:
        """The parameter selection for :mod:`es_agent.perturb` (``None``: every floating parameter)."""
        from es_agent.perturb import ParamSelector

        if self.params is None and not self.params_exclude:
            return None
        return ParamSelector(include=self.params or ("*",), exclude=self.params_exclude)

    def perturb_kwargs(self) -> dict[str, Any]:
        """``mode``, ``rank`` and ``params`` for ``perturbed`` and ``apply_update``."""
        return {"mode": self.mode, "rank": self.rank if self.mode == "lowrank" else None,
                "params": self.param_spec()}

    def policy_config(self) -> PolicyConfig:
        """The :class:`~es_agent.policy.PolicyConfig` these fields describe."""
        from es_agent.actions_space import CandidateConfig
        from es_agent.policy import PolicyConfig

        known = {f.name for f in fields(PolicyConfig)}
        unknown = sorted(set(self.policy) - known)
        if unknown:
            raise SpecError(f"AgentSpec.policy has unknown PolicyConfig field(s) {unknown} "
                            f"(known: {sorted(known)})")
        kwargs = dict(self.policy)
        if "candidates" in kwargs:
            cands = dict(kwargs["candidates"])
            if "extra_actions" in cands:
                cands["extra_actions"] = tuple(cands["extra_actions"])
            try:
                kwargs["candidates"] = CandidateConfig(**cands)
            except TypeError as exc:
                raise SpecError(f"AgentSpec.policy['candidates']: {exc}") from None
        try:
            return PolicyConfig(**kwargs)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"AgentSpec.policy: {exc}") from None

    def load_pools(self) -> PromptPools:
        """The prompt pools this spec names."""
        from es_agent.prompts import PromptPools

        if isinstance(self.prompt_pools, Mapping):
            return PromptPools.from_dict(self.prompt_pools, source="AgentSpec.prompt_pools")
        return PromptPools.load(self.prompt_pools)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for a run's config)."""
        out = asdict(self)
        out["params"] = list(self.params) if self.params is not None else None
        out["params_exclude"] = list(self.params_exclude)
        out["policy"] = dict(self.policy)
        pools = self.prompt_pools
        out["prompt_pools"] = dict(pools) if isinstance(pools, Mapping) else pools
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(**dict(data))


@dataclass(frozen=True)
class EnvSpec:
    """How a worker builds its environment: a registered Gymnasium id with keyword arguments."""

    env_id: str
    """Registered Gymnasium id (``gym.make(env_id, **kwargs)``); no default: es_agent knows no particular env
    (cotrain's run config defaults to the embedded WebArena-Lite one)."""
    module: str | None = None
    """Module imported before ``gym.make`` so that the id is registered in every worker process (``None``:
    already registered). This is configuration, not an import of :mod:`es_agent`."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gym.make`` (e.g. ``task_file`` as a list of task dicts, ``sites``)."""
    max_steps: int | None = None
    """Actions per episode after which :func:`es_agent.run_episode` cuts the episode off (on top of the env's
    own time limit)."""
    infra_errors: tuple[str, ...] = DEFAULT_INFRA_ERRORS
    """Exception classes (dotted ``module.Class`` or bare ``Class`` names, matched along the MRO) that mean
    the infrastructure failed, not the agent: the episode is retried once on a rebuilt env, then the error is
    raised. Any other exception is raised at once. Nothing is ever scored 0 for a crash."""

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise SpecError(f"EnvSpec.env_id must be a non-empty string, got {self.env_id!r}")
        if not isinstance(self.kwargs, Mapping):
            raise SpecError(f"EnvSpec.kwargs must be a dict, got {type(self.kwargs).__name__}")
        _json_safe(dict(self.kwargs), "EnvSpec.kwargs")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise SpecError(f"EnvSpec.max_steps must be a positive integer or None, got {self.max_steps!r}")
        if isinstance(self.infra_errors, str) or not all(isinstance(n, str) for n in self.infra_errors):
            raise SpecError(f"EnvSpec.infra_errors must be a sequence of class names, got "
                            f"{self.infra_errors!r}")
        object.__setattr__(self, "infra_errors", tuple(self.infra_errors))

    def make(self) -> gym.Env:
        """Build the environment (imports :attr:`module` first)."""
        import gymnasium as gym

        if self.module:
            importlib.import_module(self.module)
        return gym.make(self.env_id, **dict(self.kwargs))

    def is_infrastructure_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is one of :attr:`infra_errors` (or a subclass)."""
        names = set(self.infra_errors)
        return any(f"{cls.__module__}.{cls.__qualname__}" in names or cls.__qualname__ in names
                   for cls in type(exc).__mro__)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for a run's config)."""
        return {"env_id": self.env_id, "module": self.module, "kwargs": dict(self.kwargs),
                "max_steps": self.max_steps, "infra_errors": list(self.infra_errors)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(**dict(data))


TaskId = int | str
"""A task id of the env's task set (WebArena: integers)."""


def check_task_ids(task_ids: Sequence[TaskId], *, what: str = "task batch") -> tuple[TaskId, ...]:
    """Validate a non-empty sequence of distinct task ids (ints or strings)."""
    if isinstance(task_ids, str | bytes) or not isinstance(task_ids, Sequence):
        raise SpecError(f"{what} must be a sequence of task ids, got {task_ids!r}")
    out = tuple(task_ids)
    if not out:
        raise SpecError(f"{what} is empty")
    bad = [t for t in out if isinstance(t, bool) or not isinstance(t, int | str)]
    if bad:
        raise SpecError(f"{what}: task ids must be ints or strings, got {bad[:3]}")
    if len(set(out)) != len(out):
        raise SpecError(f"{what} has duplicate task ids: {out}")
    return out
