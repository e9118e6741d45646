"""The ``webarena-sites`` command: serve prints URLs and accounts, stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from webarena_gym.sites.cli import main


def test_serve_prints_urls_and_stops_on_ctrl_c(sites_cache: Path) -> None:
    env = {**os.environ, "WEBARENA_SITES_CACHE": str(sites_cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "webarena_gym.sites.cli", "serve"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "Ctrl-C" in line or not line:
                break
        output = "".join(lines)
        assert "emma.lopez@gmail.com / Password.123" in output and "admin / admin1234" in output
        assert "MarvelsGrantMan136 / test1234" in output
        admin_url = re.search(r"shopping_admin\s+(http://127\.0\.0\.1:\d+/admin)", output)
        assert admin_url is not None
        with urllib.request.urlopen(admin_url[1] + "/auth/login/", timeout=10) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0  # generous: a loaded CI machine stops the sites slowly
        assert "Stopped." in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_build_prints_the_cached_databases(sites_cache: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("WEBARENA_SITES_CACHE", str(sites_cache))
    assert main(["build"]) == 0
    out = capsys.readouterr().out
    assert "magento:" in out and str(sites_cache) in out


def test_serve_stops_cleanly_on_repeated_ctrl_c(sites_cache: Path) -> None:
    env = {**os.environ, "WEBARENA_SITES_CACHE": str(sites_cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "webarena_gym.sites.cli", "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        while (line := proc.stdout.readline()) and "Ctrl-C" not in line:
            pass
        for _ in range(3):  # impatient: again while the sites are stopping
            proc.send_signal(signal.SIGINT)
            time.sleep(0.1)
        assert proc.wait(timeout=120) == 0
        errors = proc.stderr.read()
        assert "Traceback" not in errors and "KeyboardInterrupt" not in errors, errors
        assert "Stopped." in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
