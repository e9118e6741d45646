"""Lazy package exports (PEP 562): a package's public names resolve on first use, so that importing the
package imports nothing heavy (no torch, no transformers, no model).

>>> __getattr__, __dir__ = lazy_exports(__name__, {"load_model": "es_agent.models"}, globals())

``es_agent`` and ``cotrain`` use it (``webarena_gym`` keeps its own: it never imports ``es_agent``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: ``names`` maps each lazy name to the module
    that defines it; a name is imported from there on first access and kept in ``namespace`` (the package's
    ``globals()``), so later lookups are plain attribute reads. Any other name is an ``AttributeError`` (so
    ``from package import submodule`` still falls back to importing the submodule)."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
