"""Deterministic seeded data of the embedded sites, built once per (data version, seed) and cached.

>>> paths = pristine_paths(seed=0)        # {"magento": Path(...), "postmill": Path(...)}, built on first use

The cache key hashes :data:`DATA_VERSION`, the seed, and the bytes of the schemas, vocabularies and seeder
sources, so editing any of them invalidates old caches by itself. Cached files are never written after they
are published (the sites copy them), and publication is an atomic directory rename, so concurrent builders are
safe."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
from pathlib import Path

from webarena_gym.sites.db import DATABASES, SCHEMA_DIR, connect, schema_sql

DATA_VERSION = "1"
"""Bump when the meaning of the seeded data changes in a way the source hash would not show."""
DEFAULT_SEED = 0
"""The seed of the bundled world (task sets are generated against it)."""
CACHE_ENV = "WEBARENA_SITES_CACHE"
"""Environment variable naming the cache directory (default: ``~/.cache/agentic-esopt/sites``)."""


def default_cache_dir() -> Path:
    """Where pristine databases are cached: ``$WEBARENA_SITES_CACHE``, else under ``$XDG_CACHE_HOME`` or
    ``~/.cache``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentic-esopt" / "sites"


def cache_key(seed: int) -> str:
    """Identifier of the pristine data for ``seed`` under the current sources."""
    digest = hashlib.sha256(f"v{DATA_VERSION}:seed{seed}".encode())
    here = Path(__file__).resolve().parent
    sources = sorted(here.glob("*.py")) + sorted(here.glob("*.json")) + [SCHEMA_DIR / "db.py"]
    sources += [SCHEMA_DIR / f"{name}.sql" for name in DATABASES]
    for path in sources:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"v{DATA_VERSION}-seed{seed}-{digest.hexdigest()[:12]}"


def build_pristine(out_dir: str | Path, seed: int = DEFAULT_SEED) -> dict[str, Path]:
    """Create ``magento.db`` and ``postmill.db`` in ``out_dir`` from ``seed`` (no caching)."""
    from webarena_gym.sites.seed.forum import seed_postmill
    from webarena_gym.sites.seed.shop import seed_magento

    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {seed!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seeders = {"magento": seed_magento, "postmill": seed_postmill}
    paths = {}
    for index, name in enumerate(DATABASES):
        path = out / f"{name}.db"
        if path.exists():
            path.unlink()
        conn = connect(path)
        try:
            conn.executescript(schema_sql(name))
            with conn:
                seeders[name](conn, random.Random(seed * 1000 + index))
            conn.execute("VACUUM")
        finally:
            conn.close()
        paths[name] = path
    return paths


def pristine_paths(seed: int = DEFAULT_SEED, cache_dir: str | Path | None = None) -> dict[str, Path]:
    """Paths of the cached pristine databases for ``seed``, building them on first use. Treat them as
    read-only."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / cache_key(seed)
    paths = {name: target / f"{name}.db" for name in DATABASES}
    if all(path.is_file() for path in paths.values()):
        return paths
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        build_pristine(staging, seed)
        try:
            os.rename(staging, target)
        except OSError:
            if not all(path.is_file() for path in paths.values()):  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return paths
