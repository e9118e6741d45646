"""Start, reset and stop the embedded sites: one server subprocess per :class:`EmbeddedSites` instance.

>>> with EmbeddedSites() as sites:
...     urls = sites.start()      # {"shopping": "http://127.0.0.1:41231", "shopping_admin": ".../admin", ...}
...     sites.reset()             # pristine state again (sessions and the site clock included)

The child process gets a pipe as stdin and exits when it closes (``close()``, interpreter exit, or this
process dying), and also polls its parent's pid, so it never outlives its owner. Each instance has its own
temporary directory with its own live database files; the pristine databases are built once per seed and
cached (:mod:`webarena_gym.sites.seed`). The directory records its owner (pid and process start time); a
start removes the directories whose owner is gone (a process killed before it could clean up), never one
whose owner still runs."""

from __future__ import annotations

import json
import logging
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from webarena_gym.errors import SiteStartError
from webarena_gym.sites.db import DATABASES, dump_digest
from webarena_gym.sites.login import ACCOUNTS, login_state
from webarena_gym.sites.seed import DEFAULT_SEED, pristine_paths
from webarena_gym.sites.server import SITE_KEYS, TOKEN_ENV
from webarena_gym.sites.web import CONTROL_PREFIX, TOKEN_HEADER

HOST = "127.0.0.1"
WORKDIR_PREFIX = "webarena-sites-"
OWNER_FILE = "owner.json"
BASE_PATHS = {"shopping": "", "shopping_admin": "/admin", "reddit": ""}
"""Path of each site's base URL on its origin (WebArena's admin lives under ``/admin``)."""
log = logging.getLogger("webarena_gym.sites")


class EmbeddedSites:
    """The embedded shop, admin panel and forum, served by one subprocess on three 127.0.0.1 ports.

    Arguments:
        seed: seed of the generated world (the bundled task set uses :data:`DEFAULT_SEED`).
        cache_dir: where pristine databases are cached (default :func:`seed.default_cache_dir`).
        port_base: serve on ports ``port_base``, ``+1``, ``+2`` instead of free ports.
        start_timeout: seconds to wait for the server to answer its health checks.
    """

    def __init__(
        self,
        *,
        seed: int = DEFAULT_SEED,
        cache_dir: str | Path | None = None,
        port_base: int | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {seed!r}")
        if port_base is not None and not 1024 <= port_base <= 65533:
            raise ValueError(f"port_base must be in 1024..65533, got {port_base!r}")
        if start_timeout <= 0:
            raise ValueError(f"start_timeout must be positive, got {start_timeout!r}")
        self.seed = seed
        self.cache_dir = cache_dir
        self.port_base = port_base
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._urls: dict[str, str] = {}
        self._token = ""
        self._finalizer: weakref.finalize | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> dict[str, str]:
        """Start the server (once) and return base URLs keyed by WebArena site key."""
        if self._proc is not None:
            return dict(self._urls)
        pristine = pristine_paths(self.seed, self.cache_dir)
        remove_stale_workdirs()
        self._dir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        owner = {"pid": os.getpid(), "start": _process_start(os.getpid())}
        (self._dir / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")
        self._token = secrets.token_hex(16)
        log = open(self._dir / "server.log", "wb")  # noqa: SIM115 - the child writes to it for its lifetime
        command = [
            sys.executable,
            "-m",
            "webarena_gym.sites.server",
            "--live-dir",
            str(self._dir),
            "--pristine-dir",
            str(next(iter(pristine.values())).parent),
            "--parent-pid",
            str(os.getpid()),
        ]
        if self.port_base is not None:
            command += ["--port-base", str(self.port_base)]
        try:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, TOKEN_ENV: self._token},
                start_new_session=True,
            )
        finally:
            log.close()
        # Runs on close(), on garbage collection and at interpreter exit (finalize's atexit hook).
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._dir)
        try:
            ports = self._read_ports()
            self._urls = {key: f"http://{HOST}:{ports[key]}{BASE_PATHS[key]}" for key in SITE_KEYS}
            self._wait_healthy(ports)
        except BaseException:
            self.close()
            raise
        return dict(self._urls)

    def _read_ports(self) -> dict[str, int]:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._proc.stdout], [], [], 0.1)
            if ready:
                line = self._proc.stdout.readline()
                if line:
                    return json.loads(line)["ports"]
            if self._proc.poll() is not None:
                raise SiteStartError(
                    f"the sites server exited with code {self._proc.returncode}:\n{self.log_tail()}"
                )
        raise SiteStartError(
            f"the sites server did not report its ports within {self.start_timeout}s:\n{self.log_tail()}"
        )

    def _wait_healthy(self, ports: dict[str, int]) -> None:
        deadline = time.monotonic() + self.start_timeout
        for key, port in ports.items():
            while True:
                try:
                    with urllib.request.urlopen(
                        f"http://{HOST}:{port}{CONTROL_PREFIX}/health", timeout=2
                    ) as resp:
                        if resp.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    pass
                if self._proc is not None and self._proc.poll() is not None:
                    raise SiteStartError(
                        f"the sites server exited with code {self._proc.returncode}:\n{self.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise SiteStartError(
                        f"site {key!r} on port {port} not healthy within {self.start_timeout}s:\n"
                        f"{self.log_tail()}"
                    )
                time.sleep(0.05)

    def reset(self) -> float:
        """Restore every site to its pristine seeded state (sessions and clock included); returns server
        seconds."""
        port = self._port("shopping")
        request = urllib.request.Request(
            f"http://{HOST}:{port}{CONTROL_PREFIX}/reset",
            data=b"",
            method="POST",
            headers={TOKEN_HEADER: self._token},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return float(json.loads(resp.read())["seconds"])
        except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
            raise SiteStartError(f"resetting the sites failed: {error}\n{self.log_tail()}") from error

    def close(self) -> None:
        """Stop the server and delete this instance's files. Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        self._proc = None
        self._urls = {}

    def __enter__(self) -> EmbeddedSites:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- information -----------------------------------------------------------------------------------------

    @property
    def urls(self) -> dict[str, str]:
        """Base URLs of the running sites (empty before :meth:`start` and after :meth:`close`)."""
        return dict(self._urls)

    @property
    def workdir(self) -> Path | None:
        """This instance's temporary directory (live databases, server log), None when not running."""
        return self._dir if self._proc is not None else None

    @property
    def pid(self) -> int | None:
        """Pid of the server process, or None when not running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def db_paths(self) -> dict[str, Path]:
        """Live database files (``magento``, ``postmill``); read them, don't write them."""
        if self._dir is None or self._proc is None:
            raise SiteStartError("the sites are not running: call start() first")
        return {name: self._dir / f"{name}.db" for name in DATABASES}

    def state_digest(self) -> dict[str, str]:
        """SHA-256 of each live database's SQL dump: equal digests mean equal site state."""
        return {name: dump_digest(path) for name, path in self.db_paths.items()}

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log."""
        if self._dir is None or not (self._dir / "server.log").exists():
            return "(no server log)"
        text = (self._dir / "server.log").read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def login_state(self, site: str, user: str | None = None, password: str | None = None) -> dict[str, Any]:
        """A Playwright storage state (cookies) logged in to ``site`` as ``user``.

        ``user`` defaults to WebArena's account for the site, ``password`` to the seeded password of the
        site's
        accounts (every seeded account of a site shares it)."""
        if site not in ACCOUNTS:
            raise ValueError(f"site must be one of {tuple(ACCOUNTS)}, got {site!r}")
        default_user, site_password = ACCOUNTS[site]
        return login_state(site, self._url(site), user or default_user, password or site_password)

    def _url(self, site: str) -> str:
        if site not in self._urls:
            raise SiteStartError(f"site {site!r} is not running (running: {sorted(self._urls)})")
        return self._urls[site]

    def _port(self, site: str) -> int:
        return int(self._url(site).split(":")[2].split("/")[0])


def _process_start(pid: int) -> str | None:
    """Start time of process ``pid`` (clock ticks after boot, ``/proc/<pid>/stat``), None where unknown: with
    the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _owner_running(owner: dict[str, Any]) -> bool:
    """Whether the process recorded in a work directory's owner file still runs."""
    pid = owner["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a live process of another user
    start = owner.get("start")
    return start is None or _process_start(pid) in (None, start)


def remove_stale_workdirs(parent: str | Path | None = None) -> list[Path]:
    """Delete the work directories under ``parent`` (default: the temporary directory) whose owner process is
    gone; return them. Left alone: a directory of a running owner (another env, test worker or user), one
    without a readable owner file (being created right now, or made by an older version), one of another user.
    """
    removed = []
    for path in sorted(Path(parent or tempfile.gettempdir()).glob(WORKDIR_PREFIX + "*")):
        try:
            if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
                continue
            owner = json.loads((path / OWNER_FILE).read_text(encoding="utf-8"))
            if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) or owner["pid"] <= 0:
                continue
        except (OSError, ValueError):
            continue
        if _owner_running(owner):
            continue
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            continue  # another starting instance removed it first
        except OSError as error:
            log.warning("could not remove the stale sites directory %s: %s", path, error)
            continue
        removed.append(path)
    return removed


def _stop(proc: subprocess.Popen[bytes], workdir: Path | None) -> None:
    """Close the child's stdin (it exits), then escalate to SIGTERM and SIGKILL; remove its directory."""
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=3)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            stream.close()
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
