"""Typed errors of :mod:`es_agent`. Agent mistakes (unparseable or invalid actions) are never exceptions: they
go to the environment, which reports them in ``last_action_error``. These errors are for bad configuration and
missing or mismatched resources."""

from __future__ import annotations


class EsAgentError(Exception):
    """Base class of every error raised by :mod:`es_agent`."""


class ModelNotFoundError(EsAgentError):
    """A model spec names nothing that exists locally (no download is ever attempted)."""


class CheckpointMismatchError(EsAgentError):
    """A checkpoint does not fit the model: another architecture, missing or unexpected tensors, other
    shapes."""


class PromptPoolError(EsAgentError):
    """A prompt pool file or a genome is malformed (names the file, the slot and the variant)."""


class DeviceError(EsAgentError):
    """A device string is not a torch device, or names a device this machine does not have."""


class CorruptWeightsError(EsAgentError):
    """A weights file exists but cannot be read: empty, truncated, or not a safetensors file (names it)."""
