"""The ``esopt`` CLI: train / eval / export / resume in process and as a subprocess (the smoke config pointed
at the toy env with ``--set``), exit codes and one-line errors, a SIGKILL drill, and the smoke config as
shipped on the embedded sites (browser)."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from toy_web_env import toy_config_dict

from cotrain.checkpoint import RunDir
from cotrain.cli import main
from cotrain.config import config_from_dict
from cotrain.trainer import train

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "configs" / "smoke.toml")
ESOPT = [sys.executable, "-m", "cotrain.cli"]


def test_cli_train_eval_export_resume_in_process(tmp_path: Path, toy_overrides: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    sets = [arg for item in toy_overrides for arg in ("--set", item)]
    args = ["train", "--config", SMOKE, "--run-dir", str(run_dir), *sets, "--set", "es.generations=1",
            "--set", "eval.every=1", "--set", "eval.n_tasks=1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "gen 1/1" in out and "run finished after 1 generation(s)" in out
    assert RunDir.open(run_dir).finished and (run_dir / "learning_curve.png").is_file()
    # the start, scored before generation 1 on the centre's held-out task and env seed, beside the centre
    (metrics,) = RunDir.open(run_dir).metrics()
    start, centre = metrics["start_eval"], metrics["centre_eval"]
    assert (start["generation"], centre["generation"]) == (0, 1) and start["rewards"].keys() == {"4"}
    held_out = (f"held-out success (test): start {round(start['success_rate'])}/1 -> centre "
                f"{round(centre['success_rate'])}/1 (gen 1)")
    assert out.splitlines()[-1] == held_out
    # ... drawing nothing from the training streams: the same rows and rewards as a run without it
    assert main([*args[:4], str(tmp_path / "no-start"), *args[5:], "--set", "eval.at_start=false"]) == 0
    assert "start" not in capsys.readouterr().out.splitlines()[-1]
    keys = ("rows", "rewards", "update", "env_seed")
    trained = [[{k: r[k] for k in keys} for r in RunDir.open(d).records()]
               for d in (run_dir, tmp_path / "no-start")]
    assert trained[0] == trained[1] and len(trained[0]) == 1

    assert main(["eval", "--run-dir", str(run_dir), "--split", "test", "--n-tasks", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["split"] == "test" and "centre" in report and "baseline" in report

    assert main(["export", "--run-dir", str(run_dir), "--out", str(tmp_path / "export")]) == 0
    assert (tmp_path / "export" / "model.safetensors").is_file()
    assert "exported to" in capsys.readouterr().out

    assert main(["eval", "--run-dir", str(run_dir), "--split", "test", "--n-tasks", "1",
                 "--export", str(tmp_path / "export"), "--no-baseline"]) == 0
    assert "centre" in capsys.readouterr().out

    assert main(["resume", "--run-dir", str(run_dir)]) == 0  # already finished: nothing to do
    out = capsys.readouterr().out
    assert "run finished after 1 generation(s)" in out and out.splitlines()[-1] == held_out


def test_the_library_prints_nothing_and_tells_the_progress_it_is_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``train`` shows no dashboard and writes no plot itself (even with ``ui.mode = "on"``): the CLI passes
    its dashboard in (``progress=``), and no library module imports the UI package."""
    cfg = config_from_dict(toy_config_dict(es={"generations": 1}, ui={"mode": "on", "plot": True}))
    events: list[tuple[Any, ...]] = []

    class Recorder:
        def start(self) -> None:
            events.append(("start",))

        def on_generation_start(self, generation: int, rollouts_total: int) -> None:
            events.append(("generation", generation, rollouts_total))

        def on_rollout_started(self, worker_id: Any) -> None:
            events.append(("started", worker_id))

        def on_rollout_done(self, worker_id: Any) -> None:
            events.append(("done", worker_id))

        def close(self) -> None:
            events.append(("close",))

    seen: list[Any] = []

    def progress(c: Any, searcher: Any) -> Recorder:
        seen.append((c, searcher))
        return Recorder()

    result = train(cfg, tmp_path / "run", progress=progress)
    assert result.finished and capsys.readouterr().out == ""
    assert not (tmp_path / "run" / "learning_curve.png").exists()
    assert len(seen) == 1 and seen[0][0].name == "toy" and seen[0][1].step_count == 1
    assert events[:2] == [("start",), ("generation", 1, 8)] and events[-1] == ("close",)
    assert events.count(("done", 0)) == 8 and ("started", 0) in events
    package = REPO / "cotrain"
    library = [f for f in package.rglob("*.py")
               if f.name != "cli.py" and "ui" not in f.relative_to(package).parts]
    imports_ui = []
    for file in library:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            imports_ui += [f"{file.name}:{node.lineno}" for n in names if n.startswith("cotrain.ui")]
    assert len(library) > 10 and not imports_ui


@pytest.mark.parametrize(("argv", "message"), [
    (["train", "--config", SMOKE, "--run-dir", "{tmp}/x", "--set", "es.popsize=4"], "unknown key es.popsize"),
    (["train", "--config", SMOKE, "--run-dir", "{tmp}/x", "--set", "es.population=odd"],
     "es.population: expected int"),
    (["train", "--config", "{tmp}/absent.toml", "--run-dir", "{tmp}/x"], "config file not found"),
    (["resume", "--run-dir", "{tmp}/nothing"], "no run directory"),
    (["eval", "--run-dir", "{tmp}"], "run.json is missing"),
    (["export", "--run-dir", "{tmp}/nothing", "--out", "{tmp}/e"], "no run directory"),
])
def test_cli_errors_are_one_line_and_exit_2(tmp_path: Path, argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_eval_unknown_split_is_a_clear_error(tmp_path: Path, toy_overrides: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    sets = [arg for item in toy_overrides for arg in ("--set", item)]
    assert main(["train", "--config", SMOKE, "--run-dir", str(run_dir), *sets, "--set", "es.generations=1",
                 "--set", "prompts.mutation=false"]) == 0
    capsys.readouterr()
    assert main(["eval", "--run-dir", str(run_dir), "--split", "validation"]) == 2
    err = capsys.readouterr().err
    assert "split='validation'" in err and "unknown split" in err
    # a generation the run has not completed is one line too; generation 0 is the start, scored
    assert main(["eval", "--run-dir", str(run_dir), "--split", "test", "--generation", "2"]) == 2
    err = capsys.readouterr().err
    assert "generation 2:" in err and "0..1 can be rebuilt" in err and err.count("\n") == 1
    assert main(["eval", "--run-dir", str(run_dir), "--split", "test", "--n-tasks", "1", "--generation", "0",
                 "--no-baseline", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["centre"]["generation"] == 0
    assert (run_dir / "eval_test_gen0.json").is_file()


def _esopt(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ESOPT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_esopt_subcommands_as_subprocesses(tmp_path: Path, toy_overrides: list[str],
                                           subprocess_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    sets = [arg for item in toy_overrides for arg in ("--set", item)]
    done = _esopt(["train", "--config", SMOKE, "--run-dir", str(run_dir), *sets], subprocess_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gen 2/2" in done.stdout and "run finished after 2 generation(s)" in done.stdout
    done = _esopt(["eval", "--run-dir", str(run_dir), "--split", "test", "--n-tasks", "1"], subprocess_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "centre" in done.stdout and "baseline" in done.stdout
    done = _esopt(["export", "--run-dir", str(run_dir), "--out", str(tmp_path / "export")], subprocess_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "export" / "config.json").is_file()
    done = _esopt(["eval", "--run-dir", str(run_dir), "--split", "nope"], subprocess_env)
    assert done.returncode == 2 and "nope" in done.stderr


@pytest.mark.slow
def test_sigkill_mid_run_leaves_a_resumable_directory(tmp_path: Path, toy_overrides: list[str],
                                                      subprocess_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    sets = [arg for item in toy_overrides for arg in ("--set", item)]
    proc = subprocess.Popen([*ESOPT, "train", "--config", SMOKE, "--run-dir", str(run_dir), *sets,
                             "--set", "es.generations=8", "--set", "checkpoint.snapshot_every=2"],
                            cwd=REPO, env=subprocess_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            manifest = run_dir / "run.json"
            if manifest.exists() and json.loads(manifest.read_text()).get("generation", 0) >= 2:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # somewhere inside generation 3 or its writes
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    run = RunDir.open(run_dir)
    assert 2 <= run.generation < 8
    run.load_state()
    done = _esopt(["resume", "--run-dir", str(run_dir)], subprocess_env)
    assert done.returncode == 0, done.stderr[-3000:]
    final = RunDir.open(run_dir)
    assert final.finished and [r["iter"] for r in final.records()] == list(range(1, 9))
    assert not [p for p in run_dir.rglob("*.tmp")]


@pytest.mark.browser
@pytest.mark.slow
def test_smoke_config_as_shipped_on_the_embedded_sites(tmp_path: Path, chromium_path: str) -> None:
    env = {**os.environ, "WEBARENA_CHROMIUM": chromium_path}
    started = time.monotonic()
    done = _esopt(["train", "--config", SMOKE, "--run-dir", str(tmp_path / "smoke"), "--ui", "off"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    run = RunDir.open(tmp_path / "smoke")
    assert run.finished and run.generation == 2 and (tmp_path / "smoke" / "learning_curve.png").is_file()
    assert time.monotonic() - started < 600


def _bad_agent(tmp_path: Path) -> dict[str, str]:
    return {"missing dir": f"agent.model={tmp_path / 'no-such-model'}",
            "uncached hub id": "agent.model=nobody/not-cached-xyz",
            "a system file": "agent.model=/etc/passwd",
            "cuda on a CPU build": "agent.device=cuda",
            "unknown device": "agent.device=tpu9"}


@pytest.mark.parametrize("case", list(_bad_agent(Path("/x"))))
def test_a_bad_model_or_device_is_refused_before_any_run_directory(
        case: str, tmp_path: Path, toy_overrides: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    if case == "cuda on a CPU build" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    run_dir = tmp_path / "run"
    sets = [arg for item in toy_overrides for arg in ("--set", item)]
    override = _bad_agent(tmp_path)[case]
    assert main(["train", "--config", SMOKE, "--run-dir", str(run_dir), *sets, "--set", override]) == 2
    err = capsys.readouterr().err
    key = override.split("=")[0]
    assert err.startswith("esopt train: error: ") and key in err, err  # names the key path
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not run_dir.exists()


def test_a_start_that_fails_before_its_first_generation_leaves_no_directory(
        tmp_path: Path, toy_overrides: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from es_agent.tiny import tiny_qwen

    model, tokenizer = tiny_qwen(seed=0)
    broken = tmp_path / "broken-model"
    model.save_pretrained(broken)
    tokenizer.save_pretrained(broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # passes the cheap check, fails to load
    run_dir = tmp_path / "run"
    run_dir.mkdir()  # an empty directory given by the user stays, empty
    sets = [arg for item in toy_overrides for arg in ("--set", item)]
    argv = ["train", "--config", SMOKE, "--run-dir", str(run_dir), *sets, "--set", f"agent.model={broken}"]
    capsys.readouterr()  # the save's progress bar
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not readable" in err and err.count("\n") == 1
    assert run_dir.is_dir() and not list(run_dir.iterdir())


@pytest.mark.browser
@pytest.mark.slow
def test_ctrl_c_on_train_is_quiet_and_a_second_writer_is_refused(
        tmp_path: Path, chromium_path: str, capsys: pytest.CaptureFixture[str],
        foreground_sigint: Callable[[], None]) -> None:
    """Ctrl-C reaches the whole process group (the Playwright driver too): one line, exit 130, no asyncio
    "Future exception was never retrieved"; while the run is alive, a second writer gets a one-line error."""
    env = {**os.environ, "WEBARENA_CHROMIUM": chromium_path}
    run_dir = tmp_path / "smoke"
    proc = subprocess.Popen([*ESOPT, "train", "--config", SMOKE, "--run-dir", str(run_dir), "--ui", "off",
                             "--set", "es.generations=50"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=foreground_sigint)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            manifest = run_dir / "run.json"
            if manifest.exists() and json.loads(manifest.read_text()).get("generation", 0) >= 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert main(["resume", "--run-dir", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert "in use by another esopt process" in err and err.count("\n") == 1
        time.sleep(2)  # inside a generation's rollouts, with the browser busy
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "Future exception was never retrieved" not in stderr and "Traceback" not in stderr, stderr
    assert "interrupted" in stderr


def test_the_interrupt_filters_drop_only_the_driver_leftovers_and_only_after_an_interrupt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reports a Playwright driver leaves when Ctrl-C cuts it short (seen in the subprocess test above,
    depending on where the signal lands) are dropped after an interrupt, and only those."""
    import logging
    import types

    from cotrain import cli as cli_module

    flt = cli_module._InterruptedDriverFilter()

    def record(message: str, error: BaseException | None = None) -> logging.LogRecord:
        return logging.LogRecord("playwright", logging.ERROR, __file__, 1, message, None,
                                 (type(error), error, None) if error else None)

    no_reply = RuntimeError("Cannot find command to respond: x")
    leftovers = [record(f"Future exception was never retrieved\n{cli_module._DRIVER_CLOSED}"),
                 record("Loop <_UnixSelectorEventLoop closed=True> that handles pid 27312 is closed"),
                 record("Error occurred in event listener", no_reply)]
    others = [record("Error occurred in event listener", RuntimeError("something else")),
              record("Future exception was never retrieved\nValueError: boom"), record("a warning")]
    assert all(flt.filter(r) for r in leftovers + others)  # before an interrupt: everything passes
    flt.interrupted = True
    assert [flt.filter(r) for r in leftovers] == [False] * 3
    assert all(flt.filter(r) for r in others)

    seen: list[object] = []
    monkeypatch.setattr(cli_module._DRIVER_FILTER, "interrupted", True)
    hook = cli_module._unraisable_after_interrupt(seen.append)

    def transport_del() -> None: ...
    transport_del.__qualname__ = "BaseSubprocessTransport.__del__"
    closed = types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"), object=transport_del)
    other = types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"), object=print)
    hook(closed)
    hook(other)
    assert seen == [other]


def test_a_ctrl_c_that_does_not_stop_the_command_exits_130_after_the_grace_period(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The fallback of a lost KeyboardInterrupt: the handler's timer prints the interrupted line and exits 130
    (os._exit, stood in for here); a command that stopped in time cancels it."""
    from cotrain import cli as cli_module

    exits: list[int] = []
    monkeypatch.setattr(cli_module, "INTERRUPT_GRACE_S", 0.05)
    monkeypatch.setattr(cli_module.os, "_exit", exits.append)
    cli_module._cancel_grace()
    cli_module._GRACE.command = "train"
    try:
        with pytest.raises(KeyboardInterrupt):
            cli_module._on_sigint(signal.SIGINT, None)
        timer = cli_module._GRACE.timer
        assert timer is not None
        timer.join(5)
        assert exits == [130]
        err = capsys.readouterr().err
        assert err == "esopt train: interrupted; the run directory keeps its last completed generation\n"
        cli_module._cancel_grace()  # stopped in time: cancelled, nothing printed, no exit
        cli_module._GRACE.command = "train"
        with pytest.raises(KeyboardInterrupt):
            cli_module._on_sigint(signal.SIGINT, None)
        cli_module._cancel_grace()
        time.sleep(0.2)
        assert exits == [130] and capsys.readouterr().err == ""
    finally:
        cli_module._cancel_grace()
        from es_agent import interrupt

        interrupt.clear()
        cli_module._DRIVER_FILTER.interrupted = False
