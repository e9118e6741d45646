"""The server process of the embedded sites: three uvicorn servers (shop, admin, forum) on one event loop.

Run by :class:`webarena_gym.sites.EmbeddedSites`, not by hand::

    python -m webarena_gym.sites.server --live-dir DIR --pristine-dir DIR --parent-pid PID [--port-base N]

It binds its sockets on 127.0.0.1 (port 0 = free ports unless ``--port-base``), prints one JSON line
``{"ports": {...}, "pid": ...}`` on stdout, then serves until its stdin closes, its parent disappears or it
gets SIGTERM/SIGINT. The reset token comes from the ``ESOPT_SITES_TOKEN`` environment variable."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.h11_impl import H11Protocol

from webarena_gym.sites import web
from webarena_gym.sites.db import DATABASES
from webarena_gym.sites.web import MAX_HEAD_BYTES

HOST = "127.0.0.1"
SITE_KEYS: tuple[str, ...] = ("shopping", "shopping_admin", "reddit")
TOKEN_ENV = "ESOPT_SITES_TOKEN"
PARENT_POLL_S = 0.5
LINGER_S = 2.0
"""How long a connection refused for its head keeps reading (and dropping) what the client still sends."""


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to :func:`serve` (several servers share one loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol, answering an oversized request head with 431 instead of a reset connection.

    A head that arrives whole is checked by :class:`~webarena_gym.sites.web.RequestGuard`; one that does not
    (h11 buffers at most :data:`MAX_HEAD_BYTES` of it) fails to parse here. uvicorn answers any unparsable
    request with 400 and closes at once; with a large head still arriving,
    closing a socket that holds unread data sends a TCP reset and the client never sees the answer. Here an
    over-long head gets ``431 Request Header Fields Too Large``, then the connection reads and drops the rest
    (for :data:`LINGER_S` at most) before closing, like a real server's lingering close."""

    _lingering = False

    def send_400_response(self, msg: str) -> None:
        buffered, _ = self.conn.trailing_data
        if len(buffered) <= MAX_HEAD_BYTES:
            super().send_400_response(msg)
            return
        body = f"Request header fields too large: at most {MAX_HEAD_BYTES} bytes.".encode()
        head = (
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(body)
        )
        self.transport.write(head + body)
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if not self._lingering:
            super().data_received(data)

    def eof_received(self) -> None:
        if self._lingering:
            self.transport.close()


def bind(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (``port`` 0 picks a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def build_apps(server: web.ServerState, ports: dict[str, int]) -> dict[str, Starlette]:
    """The three ASGI apps, keyed by WebArena site key."""
    from webarena_gym.sites.admin.app import build_app as build_admin
    from webarena_gym.sites.forum.app import build_app as build_forum
    from webarena_gym.sites.shop.app import build_app as build_shop

    return {
        "shopping": build_shop(server, ports["shopping"]),
        "shopping_admin": build_admin(server, ports["shopping_admin"]),
        "reddit": build_forum(server, ports["reddit"]),
    }


async def serve(apps: dict[str, Starlette], sockets: dict[str, socket.socket],
                parent_pid: int | None) -> None:
    """Serve every app on its socket until asked to stop."""
    servers = []
    for app in apps.values():
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
            server_header=False,
            http=_Protocol,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        )
        servers.append(_Server(config))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def request_stop(*_: object) -> None:
        loop.call_soon_threadsafe(stop.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop)

    def watch_stdin() -> None:  # the parent holds the other end: EOF means it closed us or died
        while sys.stdin.buffer.read(1024):
            pass
        request_stop()

    threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()

    async def watch_parent() -> None:
        while not stop.is_set():
            if parent_pid is not None and os.getppid() != parent_pid:
                stop.set()
            await asyncio.sleep(PARENT_POLL_S)

    async def stopper() -> None:
        await stop.wait()
        for server in servers:
            server.should_exit = True

    tasks = [
        asyncio.create_task(s.serve(sockets=[sockets[key]])) for s, key in zip(servers, apps, strict=True)
    ]
    await asyncio.gather(watch_parent(), stopper(), *tasks)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the server process."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live-dir", type=Path, required=True, help="directory of the live database files")
    parser.add_argument(
        "--pristine-dir", type=Path, required=True, help="directory of the pristine databases"
    )
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    parser.add_argument("--port-base", type=int, default=0, help="ports N, N+1, N+2 (0: free ports)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        parser.error(f"{TOKEN_ENV} must be set")
    sockets = {key: bind(args.port_base + i if args.port_base else 0) for i, key in enumerate(SITE_KEYS)}
    ports = {key: sock.getsockname()[1] for key, sock in sockets.items()}
    state = web.ServerState(
        {n: args.live_dir / f"{n}.db" for n in DATABASES},
        {n: args.pristine_dir / f"{n}.db" for n in DATABASES},
        token,
    )
    apps = build_apps(state, ports)
    sys.stdout.write(json.dumps({"ports": ports, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    try:
        asyncio.run(serve(apps, sockets, args.parent_pid))
    finally:
        state.close()
        for sock in sockets.values():
            sock.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
