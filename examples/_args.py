"""Command-line flags from a dataclass of arguments (one flag per field), shared by the example scripts."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def parse_args(cls: type[T], argv: Sequence[str] | None = None, description: str | None = None) -> T:
    """``--field-name VALUE`` for each field of the dataclass ``cls`` (a bool flag alone means true, or takes
    ``true``/``false``; optional fields take ``none``); the field's ``metadata["help"]`` is its help text."""
    parser = argparse.ArgumentParser(description=description or cls.__doc__)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        flag = {"nargs": "?", "const": True} if hints[f.name] is bool else {}
        parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=f.default,
                            type=_converter(hints[f.name]), help=f"{f.metadata.get('help', '')} "
                            f"(default: {f.default})", **flag)
    return cls(**vars(parser.parse_args(argv)))


def _converter(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    optional = len(args) < len(typing.get_args(tp))
    base = args[0] if optional else tp

    def convert(text: str) -> Any:
        if optional and text.lower() in ("none", "null"):
            return None
        if base is bool:
            if text.lower() not in ("true", "false", "1", "0"):
                raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
            return text.lower() in ("true", "1")
        return base(text)

    return convert
