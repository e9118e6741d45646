"""Starting, resetting and stopping the embedded sites: no orphans, loopback only, pristine after reset."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from webarena_gym.errors import WebArenaGymError
from webarena_gym.sites import EmbeddedSites, LoginError, SiteStartError
from webarena_gym.sites.db import dump_digest
from webarena_gym.sites.seed import pristine_paths


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return "\nState:\tZ" not in status.read()
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _port(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def test_start_and_close_leave_no_process(sites_cache: Path, Client: type) -> None:
    sites = EmbeddedSites(cache_dir=sites_cache)
    urls = sites.start()
    assert set(urls) == {"shopping", "shopping_admin", "reddit"}
    assert urls["shopping_admin"].endswith("/admin")
    assert len({_port(u) for u in urls.values()}) == 3
    assert sites.start() == urls  # idempotent
    pid = sites.pid
    assert pid is not None and _alive(pid)
    workdir = sites.db_paths["magento"].parent
    for url in urls.values():
        assert Client(url).get("/").status == 200
    sites.close()
    assert not _alive(pid)
    assert not workdir.exists()
    sites.close()  # idempotent
    assert sites.urls == {} and sites.pid is None
    with pytest.raises(SiteStartError):
        sites.reset()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_sites_listen_on_loopback_only(running_sites: EmbeddedSites) -> None:
    ports = {_port(url) for url in running_sites.urls.values()}
    listening: dict[int, set[str]] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A":  # LISTEN
            address, port = local.split(":")
            listening.setdefault(int(port, 16), set()).add(address)
    for port in ports:
        assert listening.get(port) == {"0100007F"}, f"port {port} bound to {listening.get(port)}"
    ipv6 = Path("/proc/net/tcp6")
    if ipv6.exists():
        for line in ipv6.read_text().splitlines()[1:]:
            assert int(line.split()[1].split(":")[1], 16) not in ports or line.split()[3] != "0A"


@contextlib.contextmanager
def _sites_owner(
    sites_cache: Path, tmpdir: Path | None = None
) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    """A process that starts embedded sites and then sleeps: the process, its server's pid and its work
    directory (the process is killed on exit if still running). ``tmpdir``: where it makes that directory."""
    script = (
        "import time\n"
        "from webarena_gym.sites import EmbeddedSites\n"
        f"s = EmbeddedSites(cache_dir={str(sites_cache)!r}); s.start()\n"
        "print(s.pid, s.db_paths['magento'].parent, flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmpdir)} if tmpdir is not None else None
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert owner.stdout is not None
        server_pid, workdir = owner.stdout.readline().split()
        yield owner, int(server_pid), Path(workdir)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_server_exits_when_its_parent_dies(sites_cache: Path) -> None:
    with _sites_owner(sites_cache) as (parent, child_pid, _):
        assert _alive(child_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait_gone(child_pid), "the sites server outlived its parent"


def test_server_stops_at_interpreter_exit_without_close(sites_cache: Path) -> None:
    script = (
        "from webarena_gym.sites import EmbeddedSites\n"
        f"s = EmbeddedSites(cache_dir={str(sites_cache)!r}); s.start()\n"
        "print(s.pid, s.db_paths['magento'].parent, flush=True)\n"
    )
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    pid, workdir = done.stdout.split()
    assert _wait_gone(int(pid), timeout=5), "the sites server outlived the interpreter that started it"
    assert not Path(workdir).exists()


def test_failed_start_raises_a_typed_error(sites_cache: Path) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    try:
        sites = EmbeddedSites(cache_dir=sites_cache, port_base=blocker.getsockname()[1], start_timeout=20)
        with pytest.raises(SiteStartError, match="exited") as info:
            sites.start()
        assert isinstance(info.value, WebArenaGymError)
        assert sites.pid is None
    finally:
        blocker.close()


def test_arguments_are_validated() -> None:
    with pytest.raises(TypeError, match="seed"):
        EmbeddedSites(seed="0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="port_base"):
        EmbeddedSites(port_base=80)
    with pytest.raises(ValueError, match="start_timeout"):
        EmbeddedSites(start_timeout=0)


def test_reset_restores_the_pristine_state(sites: EmbeddedSites, sites_cache: Path, Client: type) -> None:
    pristine = {name: dump_digest(path) for name, path in pristine_paths(0, sites_cache).items()}
    assert sites.state_digest() == pristine
    shop = Client(sites.urls["shopping"])
    shop.post(
        "/customer/account/loginPost/",
        {"login[username]": "emma.lopez@gmail.com", "login[password]": "Password.123"},
    )
    shop.post("/checkout/cart/add/", {"product_id": 1, "qty": 1})
    forum = Client(sites.urls["reddit"])
    forum.post("/login_check", {"_username": "MarvelsGrantMan136", "_password": "test1234"})
    forum.post("/submit", {"forum": "books", "title": "A test post", "body": "Hello"})
    changed = sites.state_digest()
    assert changed["magento"] != pristine["magento"] and changed["postmill"] != pristine["postmill"]
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        server_seconds = sites.reset()
        timings.append((time.perf_counter() - start, server_seconds))
        assert sites.state_digest() == pristine
        forum.post("/submit", {"forum": "books", "title": "x", "body": "y"})  # logged out by the reset
    best = min(timings)
    print(f"\nreset: {best[0] * 1000:.1f} ms round trip, {best[1] * 1000:.1f} ms in the server (best of 5)")
    # The old session is gone: the cart page asks to log in again.
    assert "Customer Login" in shop.get("/checkout/cart/").text


def test_two_instances_do_not_share_state(
    running_sites: EmbeddedSites, sites_cache: Path, Client: type
) -> None:
    running_sites.reset()
    with EmbeddedSites(cache_dir=sites_cache) as other:
        assert {_port(u) for u in other.urls.values()}.isdisjoint(
            _port(u) for u in running_sites.urls.values()
        )
        forum = Client(other.urls["reddit"])
        forum.post("/login_check", {"_username": "MarvelsGrantMan136", "_password": "test1234"})
        page = forum.post("/submit", {"forum": "books", "title": "Only in the other instance", "body": ""})
        assert "Only in the other instance" in page.text
        assert other.state_digest()["postmill"] != running_sites.state_digest()["postmill"]
        assert (
            "Only in the other instance"
            not in Client(running_sites.urls["reddit"]).get("/f/books?sort=new").text
        )


def test_login_state_gives_a_logged_in_cookie(sites: EmbeddedSites, Client: type) -> None:
    state = sites.login_state("shopping")
    assert state["origins"] == [] and len(state["cookies"]) == 1
    cookie = state["cookies"][0]
    assert cookie["domain"] == "127.0.0.1" and cookie["path"] == "/"
    client = Client(sites.urls["shopping"])
    client.jar.set_cookie(_cookie(cookie["name"], cookie["value"]))
    assert "Welcome, Emma Lopez!" in client.get("/customer/account/").text
    assert sites.login_state("shopping", "alex.martin@gmail.com")["cookies"]
    assert sites.login_state("shopping_admin")["cookies"] and sites.login_state("reddit")["cookies"]
    with pytest.raises(LoginError):
        sites.login_state("shopping", "emma.lopez@gmail.com", "wrong password")
    with pytest.raises(ValueError, match="site"):
        sites.login_state("gitlab")


def _cookie(name: str, value: str) -> object:
    import http.cookiejar

    return http.cookiejar.Cookie(
        0, name, value, None, False, "127.0.0.1", False, False, "/", True, False, None, True, None, None, {}
    )


def _workdir(parent: Path, name: str, owner: object | None) -> Path:
    path = parent / f"webarena-sites-{name}"
    path.mkdir()
    (path / "magento.db").write_bytes(b"x" * 1000)
    if owner is not None:
        (path / "owner.json").write_text(owner if isinstance(owner, str) else json.dumps(owner))
    return path


def test_stale_workdirs_are_those_of_owners_that_are_gone(tmp_path: Path) -> None:
    from webarena_gym.sites import lifecycle

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = {"pid": os.getpid(), "start": lifecycle._process_start(os.getpid())}
    stale = {
        _workdir(tmp_path, "dead", {"pid": dead.pid, "start": None}),
        _workdir(tmp_path, "reused", {**me, "start": "1"}),  # this pid, but another process's start time
    }
    kept = {
        _workdir(tmp_path, "mine", me),
        _workdir(tmp_path, "mine-no-start", {"pid": os.getpid()}),
        _workdir(tmp_path, "no-owner", None),  # being created right now, or made by an older version
        _workdir(tmp_path, "garbage", "{not json"),
        _workdir(tmp_path, "bad-pid", {"pid": "1"}),
    }
    (tmp_path / "webarena-sites-file").write_text("not a directory")
    assert set(lifecycle.remove_stale_workdirs(tmp_path)) == stale
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)
    assert lifecycle.remove_stale_workdirs(tmp_path) == []


def test_a_killed_owners_workdir_is_removed_at_the_next_start(
    sites_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A private temporary directory: a test worker starting sites beside this one sweeps the shared one, and
    # would remove the killed owner's directory before this test looks at it.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with (
        _sites_owner(sites_cache, tmp_path) as (_, _, live_workdir),
        _sites_owner(sites_cache, tmp_path) as (owner, server_pid, workdir),
    ):
        assert workdir.parent == live_workdir.parent == tmp_path
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        assert _wait_gone(server_pid)
        assert workdir.is_dir(), "nothing was left behind to clean up"
        with EmbeddedSites(cache_dir=sites_cache) as again:
            assert not workdir.exists(), "the killed owner's directory was not removed"
            assert again.workdir is not None and again.workdir.parent == tmp_path and again.workdir.is_dir()
        assert live_workdir.is_dir(), "a live one was removed"
