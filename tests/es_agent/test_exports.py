"""The packages' public names: every name of ``__all__`` resolves (lazily where the package says so), the lazy
maps hold nothing outside ``__all__``, every error of a package's ``errors`` module is exported, and importing
a package stays light."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from types import ModuleType

import pytest

PACKAGES = ("es_agent", "cotrain", "webarena_gym", "webarena_gym.sites")
ERROR_MODULES = {"es_agent": "es_agent.errors", "cotrain": "cotrain.errors",
                 "webarena_gym": "webarena_gym.errors"}


def _lazy_map(package: ModuleType) -> dict[str, str]:
    lazy = package.__dict__.get("_LAZY")
    assert isinstance(lazy, dict), f"{package.__name__} keeps its lazy names in _LAZY"
    return lazy


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_out_and_the_lazy_map_holds_nothing_else(name: str) -> None:
    package = importlib.import_module(name)
    exported = list(package.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    outside = sorted(set(_lazy_map(package)) - set(exported))
    assert not outside, f"{name}'s lazy map has names outside __all__: {outside}"
    assert set(exported) <= set(dir(package))


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves_to_its_defining_module(name: str) -> None:
    package = importlib.import_module(name)
    lazy = _lazy_map(package)
    for public in package.__all__:
        value = getattr(package, public)  # AttributeError or ImportError: a stale entry
        if public in lazy:
            assert getattr(importlib.import_module(lazy[public]), public) is value
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


@pytest.mark.parametrize("name", sorted(ERROR_MODULES))
def test_every_error_of_the_package_is_exported(name: str) -> None:
    package, errors = importlib.import_module(name), importlib.import_module(ERROR_MODULES[name])
    classes = [obj for obj in vars(errors).values()
               if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == errors.__name__]
    assert classes
    missing = sorted(c.__name__ for c in classes if c.__name__ not in package.__all__)
    assert not missing, f"{name}.__all__ lacks the errors {missing}"
    for cls in classes:
        assert getattr(package, cls.__name__) is cls


def test_importing_the_packages_stays_light() -> None:
    code = ("import sys, es_agent, cotrain, webarena_gym, webarena_gym.sites; "
            "print(sorted(m for m in ('torch', 'transformers', 'evotorch', 'ray', 'playwright') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
