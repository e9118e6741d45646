"""Integrity of a run directory: the digests of the files a run is rebuilt from, the hash chain of the update
log, the checks of a weight snapshot, and the lock that keeps two writers out of one directory.

- ``update_log.jsonl`` is a hash chain: each line carries ``prev``, the SHA-256 of the previous line's
  canonical JSON (:func:`record_digest`; :data:`GENESIS` for the first line), and ``run.json``'s
  ``log_head`` is the digest of the last committed line. An edited, removed or reordered line breaks the
  chain.
- A snapshot's ``snapshot.json`` and its ``run.json`` entry record the SHA-256 and size of
  ``model.safetensors`` and the weight checksum; :func:`verify_snapshot` compares all of them.
- ``run.json``'s ``files`` holds the SHA-256 of ``config.json`` and ``initial_prompt_pools.json``.

This detects accidental and careless changes (a flipped byte, an edited seed, a zeroed checksum); it is not an
authentication: whoever can write the directory can recompute every digest.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cotrain.errors import CheckpointError, RunDirError, RunIntegrityError

GENESIS = "0" * 64
"""``prev`` of the first line of the update log (and ``log_head`` of a run without generations)."""
LOCK_FILE = ".esopt-lock"
"""Lock file of a run directory (holds the pid of the process writing the run)."""
DIGEST = re.compile(r"^[0-9a-f]{64}$")
"""A SHA-256 in hex."""


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 8 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(8 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_line(record: Mapping[str, Any]) -> str:
    """The canonical JSON of one log record (compact, key order kept, no trailing newline)."""
    return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def record_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of :func:`canonical_line` of ``record``: the ``prev`` of the line after it."""
    return hashlib.sha256(canonical_line(record).encode("utf-8")).hexdigest()


def verify_chain(file: Path, lines: Sequence[tuple[int, Mapping[str, Any]]], head: str) -> None:
    """Check the ``prev`` links of the committed ``(line number, record)`` pairs and that the last one hashes
    to ``head`` (``run.json``'s ``log_head``); a break raises RunIntegrityError naming line and generation."""
    expected = GENESIS
    for number, record in lines:
        if record.get("prev") != expected:
            raise RunIntegrityError(
                f"{file}, line {number} (generation {record.get('iter')}): its 'prev' digest does not match "
                "the line before it: the update log was edited, reordered or had lines removed")
        expected = record_digest(record)
    if expected != head:
        last = f"line {lines[-1][0]} (generation {lines[-1][1].get('iter')})" if lines else "the empty log"
        raise RunIntegrityError(
            f"{file}: {last} does not match the log_head recorded in {file.parent / 'run.json'}: the last "
            "committed line (or run.json's log_head) was edited")


def verify_file_digest(file: Path, recorded: str, where: Path, what: str) -> None:
    """Check that ``file`` hashes to ``recorded`` (written in ``where``); ``what`` names it in the error."""
    actual = sha256_file(file)
    if actual != recorded:
        raise RunIntegrityError(f"{file} ({what}) has sha256 {actual[:12]}, {where} records {recorded[:12]}: "
                                "the file changed after it was written")


def verify_snapshot(run_path: Path, entry: Mapping[str, Any], folder: Path, weights_file: str,
                    snapshot_format: str, *, digests: bool) -> Path:
    """Check one snapshot listed in ``run.json`` (``entry``) against its folder and return its weights file.

    The folder and its files must be real files inside the run directory (no symlinks); ``snapshot.json`` must
    name the same generation and weight checksum as ``entry``; with ``digests`` (runs of the current format)
    the weights file must have the size and SHA-256 that both record. Without them (older runs) the weights
    file must at least be a readable safetensors file."""
    generation = entry["generation"]
    what = f"snapshot of generation {generation}"
    manifest = run_path / "run.json"
    _check_inside(run_path, folder, what)
    meta_path = folder / "snapshot.json"
    weights = folder / weights_file
    for path in (meta_path, weights):
        _check_inside(run_path, path, what)
    from cotrain.checkpoint import read_json

    meta = read_json(meta_path, CheckpointError)
    if not isinstance(meta, dict) or meta.get("format") != snapshot_format:
        raise CheckpointError(f"{meta_path} ({what}) is not a snapshot manifest (expected format "
                              f"{snapshot_format!r})")
    for key in ("generation", "checksum", *(("sha256",) if digests else ())):
        if meta.get(key) != entry.get(key):
            raise RunIntegrityError(f"{meta_path} ({what}) records {key}={meta.get(key)!r}, {manifest} "
                                    f"records {entry.get(key)!r}")
    if digests and (not isinstance(meta.get("bytes"), int) or isinstance(meta["bytes"], bool)):
        raise RunIntegrityError(f"{meta_path} ({what}): 'bytes' must be an integer, got "
                                f"{meta.get('bytes')!r}")
    if not weights.is_file():
        raise CheckpointError(f"missing checkpoint {weights} (listed in {manifest})")
    if digests:
        size = weights.stat().st_size
        if size != meta["bytes"]:
            raise RunIntegrityError(f"{weights} ({what}) has {size} bytes, {meta_path} records "
                                    f"{meta['bytes']}: the file is truncated or was replaced")
        verify_file_digest(weights, meta["sha256"], meta_path, what)
    else:
        check_safetensors(weights, what)
    return weights


def check_safetensors(file: Path, what: str) -> None:
    """Check that ``file`` is a complete safetensors file (header and the tensor data it declares)."""
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="pt") as fh:
            fh.keys()
    except Exception as exc:  # safetensors raises its own SafetensorError and OSError for broken files
        raise CheckpointError(f"{file} ({what}) is not a readable safetensors file (empty or truncated?): "
                              f"{type(exc).__name__}: {exc}") from None


def _check_inside(run_path: Path, path: Path, what: str) -> None:
    if path.is_symlink():
        raise RunIntegrityError(f"{path} ({what}) is a symbolic link: snapshots must be plain files inside "
                                f"the run directory {run_path}")
    if not path.resolve().is_relative_to(run_path.resolve()):
        raise RunIntegrityError(f"{path} ({what}) lies outside the run directory {run_path}")


class RunLock:
    """An exclusive ``flock`` on a run directory's :data:`LOCK_FILE`, held while a process writes the run
    (``esopt train`` / ``resume``); a second writer gets a RunDirError naming the holder's pid. The kernel
    drops the lock when the holder exits, killed or not."""

    def __init__(self, directory: Path) -> None:
        self.file = directory / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (no waiting); RunDirError when another process (or another RunDir) holds it."""
        if self._fd is not None:
            return
        fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunDirError(f"{self.file.parent} is in use by another esopt process (pid {holder}, lock "
                              f"{self.file}): wait for it to end or stop it first") from None
        except OSError as exc:
            os.close(fd)
            raise RunDirError(f"cannot lock {self.file}: {exc}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (a no-op when not held); the file stays, empty of meaning."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
