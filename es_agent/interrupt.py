"""A process-wide "interrupt requested" flag: set by a Ctrl-C handler (``esopt``'s), read by the episode
retry of :class:`~es_agent.worker.Replica` and the lockstep population.

Ctrl-C reaches the whole process group, so the browser can die of the same SIGINT before Python raises
``KeyboardInterrupt`` in the main thread, and that ``KeyboardInterrupt`` can be lost inside the Playwright
driver's event loop. The episode then fails with a "browser is gone" error, which is an infrastructure error
and would be retried on a rebuilt browser: the run would go on after the user asked it to stop. With the flag
set, the retry raises ``KeyboardInterrupt`` instead.

The handler itself can run late: after the failed episode was already retried (the signal is handled at a
bytecode boundary of the main thread, which may be inside the rebuild), and its ``KeyboardInterrupt`` can be
lost there too, while the flag stays set. So every episode attempt and every generation also start with
:func:`check`: a lost interrupt stops the run within one episode.
"""

from __future__ import annotations

import threading

_REQUESTED = threading.Event()


def request() -> None:
    """Note that the user asked this process to stop (call it from the SIGINT handler)."""
    _REQUESTED.set()


def requested() -> bool:
    """Whether an interrupt was requested since the last :func:`clear`."""
    return _REQUESTED.is_set()


def clear() -> None:
    """Forget an earlier interrupt (an entry point starting afresh in the same process)."""
    _REQUESTED.clear()


def raise_if_requested(exc: BaseException) -> None:
    """``KeyboardInterrupt`` (from ``exc``) when an interrupt was requested: what an infrastructure failure
    during an interrupt really is. Otherwise nothing."""
    if _REQUESTED.is_set():
        raise KeyboardInterrupt(f"interrupted ({type(exc).__name__}: {exc})") from exc


def check() -> None:
    """``KeyboardInterrupt`` when an interrupt was requested (the start of an episode or a generation)."""
    if _REQUESTED.is_set():
        raise KeyboardInterrupt("interrupted")
