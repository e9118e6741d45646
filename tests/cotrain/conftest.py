"""Fixtures of the cotrain tests: a toy text web env (``toy_web_env``, importable by subprocesses and Ray
workers through ``PYTHONPATH``) and small run configurations on it with the tiny random Qwen."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import toy_web_env  # noqa: E402  (registers CotrainToyWeb-v0)
from toy_web_env import toy_config_dict  # noqa: E402

from cotrain.config import TrainConfig, config_from_dict  # noqa: E402


@pytest.fixture
def toy_config() -> Callable[..., TrainConfig]:
    """``toy_config(es={"generations": 3}, ...)`` -> a TrainConfig on the toy env."""

    def make(**sections: dict[str, Any]) -> TrainConfig:
        return config_from_dict(toy_config_dict(**sections))

    return make


def _default_sigint() -> None:
    """Run in a child before its exec: SIGINT back to its default action, so the child Python installs its
    KeyboardInterrupt handler (and ``esopt`` its own). A suite started in the background by a script
    (``make test &``) inherits SIGINT ignored, as a POSIX shell starts every background job, and so would
    the child: ``esopt`` then keeps the ignored disposition and a test's SIGINT never reaches it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def foreground_sigint() -> Callable[[], None]:
    """A ``preexec_fn`` for the subprocesses a test interrupts as a terminal's Ctrl-C would
    (:func:`_default_sigint`)."""
    return _default_sigint


@pytest.fixture(scope="session")
def subprocess_env() -> dict[str, str]:
    """Environment for subprocesses that must import ``toy_web_env`` and the repository's packages."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


@pytest.fixture(scope="session")
def toy_overrides() -> list[str]:
    """``--set`` overrides that point a config at the toy env with the tiny model."""
    return [f"env.env_id={toy_web_env.ENV_ID}", "env.module=toy_web_env", "env.infra_errors=[]",
            "env.train_templates=none", "env.max_steps=2", "agent.model=tiny:0",
            "agent.policy={max_prompt_tokens = 512}", "ui.mode=off"]


@pytest.fixture(scope="session")
def pools() -> Any:
    """The package's default prompt pools."""
    from es_agent.prompts import PromptPools

    return PromptPools.load()


@pytest.fixture(scope="session")
def tiny() -> tuple[Any, Any]:
    """A tiny Qwen2 model and its tokenizer (shared: tests must not change its weights)."""
    from es_agent.tiny import tiny_qwen

    return tiny_qwen(seed=0)


# --- The shipped smoke config, run once per session (engineer D, issue #11) ---------------------------------
SMOKE_CONFIG = REPO / "configs" / "smoke.toml"


@dataclass(frozen=True)
class SmokeRun:
    """One ``esopt train --config configs/smoke.toml`` as a subprocess, on the embedded sites."""

    run_dir: Path
    """The run directory it wrote."""
    returncode: int
    """The process's exit status."""
    stderr: str
    """Its standard error (the tail goes into assertion messages)."""
    seconds: float
    """Wall seconds it took."""


@pytest.fixture(scope="session")
def shipped_smoke_run(tmp_path_factory: pytest.TempPathFactory, chromium_path: str) -> SmokeRun:
    """The smoke config as shipped (tiny random Qwen, embedded sites, 2 generations), run once for every test
    that checks it (about 40 s on a quiet machine): the tests assert on the result, the fixture does not."""
    run_dir = tmp_path_factory.mktemp("shipped-smoke") / "smoke"
    env = {**os.environ, "WEBARENA_CHROMIUM": chromium_path}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cotrain.cli", "train", "--config", str(SMOKE_CONFIG),
                           "--run-dir", str(run_dir), "--ui", "off"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    return SmokeRun(run_dir, done.returncode, done.stderr, time.monotonic() - started)
