"""Lazy package exports (PEP 562) for ``webarena_gym`` and its subpackages: public names resolve on first use,
so that ``import webarena_gym`` starts no browser and imports no web stack.

>>> __getattr__, __dir__ = lazy_exports(__name__, {"load_tasks": "webarena_gym.tasks"}, globals())

The env layer imports nothing above it, so this is its own copy of :func:`es_agent.lazy.lazy_exports`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``package``'s module ``__getattr__`` and ``__dir__``: each name of ``names`` is imported from the
    module it maps to on first access and kept in ``namespace`` (the package's ``globals()``); any other name
    is an ``AttributeError``, so ``from package import submodule`` still imports the submodule."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value = getattr(importlib.import_module(names[name]), name)
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
