"""The model caches convert once under concurrency (two pytest-xdist workers, two runs): a second converter
of the same cache entry waits on :func:`es_agent.models.cache_lock` and then uses the first one's result.
Real processes; the wait is observed in ``/proc/locks`` (a blocked ``flock``), not timed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from es_agent.embedded_qwen import cache_dir_for, locate_parts
from es_agent.errors import ModelNotFoundError
from es_agent.models import MANIFEST, cache_lock

REPO = Path(__file__).resolve().parent.parent
PROC_LOCKS = Path("/proc/locks")


def _blocked_on_a_lock(pid: int) -> bool:
    """Whether process ``pid`` waits for a lock (a ``->`` line of ``/proc/locks``)."""
    for line in PROC_LOCKS.read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[5] == str(pid):
            return True
    return False


def _start(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                                       if p)}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_until_blocked(child: subprocess.Popen[str], within: float = 180.0) -> None:
    """Return once ``child`` waits on a lock; fail if it exits (or runs on) without ever waiting."""
    deadline = time.monotonic() + within
    while not _blocked_on_a_lock(child.pid):
        if child.poll() is not None:
            out, err = child.communicate()
            pytest.fail(f"the second converter never waited for the lock (exit {child.returncode}):\n"
                        f"{out}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"the second converter did not wait for the lock within {within:.0f} s")
        time.sleep(0.05)


def _finish(child: subprocess.Popen[str]) -> str:
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err[-3000:]
    return out.strip()


@pytest.fixture(autouse=True)
def _needs_proc_locks() -> None:
    if not PROC_LOCKS.is_file():
        pytest.skip("/proc/locks (Linux) is needed to see a process wait for a lock")


def test_a_second_gguf_converter_waits_and_uses_the_first_ones_result(tmp_path: Path) -> None:
    gguf = tmp_path / "not-a-model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))  # converting this fails: only the cache entry made meanwhile helps
    dest = tmp_path / "cache" / "entry"
    with cache_lock(dest) as lock_file:
        assert lock_file == dest.parent / ".entry.lock" and lock_file.is_file()
        child = _start("import sys; from es_agent.models import convert_gguf; "
                       "print(convert_gguf(sys.argv[1], dest=sys.argv[2]))", str(gguf), str(dest))
        try:
            _wait_until_blocked(child)
            dest.mkdir()
            (dest / MANIFEST).write_text("{}\n")  # what the first converter leaves when it is done
        except BaseException:
            child.kill()
            child.communicate()
            raise
    assert _finish(child) == str(dest)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["entry"]  # no lock file, no temp directory


def test_a_second_embedded_qwen_caller_waits_instead_of_assembling_again(tmp_path: Path) -> None:
    try:
        locate_parts()
    except ModelNotFoundError as exc:
        pytest.skip(str(exc))
    dest = cache_dir_for(tmp_path)
    with cache_lock(dest.with_name(f"{dest.name}.assemble")):
        child = _start("import sys; from es_agent.embedded_qwen import embedded_qwen_path; "
                       "print(embedded_qwen_path(cache_dir=sys.argv[1]))", str(tmp_path))
        try:
            _wait_until_blocked(child)  # past the parts' sha256 checks, before assembling anything
            assert sorted(p.name for p in dest.parent.iterdir()) == [f".{dest.name}.assemble.lock"]
            dest.mkdir()
            (dest / MANIFEST).write_text("{}\n")
        except BaseException:
            child.kill()
            child.communicate()
            raise
    assert _finish(child) == str(dest)
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    child = _start("import sys, time; from es_agent.models import cache_lock\n"
                   "with cache_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(600)\n",
                   str(entry))
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
    finally:
        child.kill()  # SIGKILL inside the with block: no cleanup ran
        child.communicate()
    assert (tmp_path / ".entry.lock").is_file()  # its file stays behind, its lock does not
    acquired = threading.Event()

    def take() -> None:
        with cache_lock(entry):
            acquired.set()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert acquired.is_set(), "the lock of a killed process was still held"
    assert not (tmp_path / ".entry.lock").exists()
