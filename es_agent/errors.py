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


class AxTreeError(EsAgentError, ValueError):
    """An accessibility tree text that cannot be read as one (names the offending text)."""


class CandidateRowError(EsAgentError, ValueError):
    """A candidate row does not fit the problem: wrong width, a non-integer seed, a prompt id out of range."""


class EpisodeInfrastructureError(EsAgentError):
    """An episode failed for an infrastructure reason twice in a row (the env was rebuilt in between)."""


class ReplicaStateError(EsAgentError):
    """A replica cannot reach the centre it is asked for (a gap in the update log, or a log that starts
    after the replica's position)."""


class ReplicaDivergenceError(EsAgentError):
    """Live workers' weight checksums disagree with each other or with the driver's expected checksum."""


class WorkerLostError(EsAgentError):
    """Workers kept dying on the same piece of work (``max_piece_attempts`` times)."""


class WeightsStateError(EsAgentError):
    """The weights of a model are in an unknown state (a restore or an update failed part way)."""


class SpecError(EsAgentError, ValueError):
    """A spec field has a bad value (names the field, the value and what was expected)."""


class PerturbationError(EsAgentError, ValueError):
    """A perturbation or update was asked for with bad arguments or in a state that does not allow it."""


class HardwareError(EsAgentError, ValueError):
    """A hardware choice was asked with a bad value (names the value and what was expected)."""


class AgreementError(EsAgentError):
    """A recorded reference trajectory (step agreement) that cannot be read or used."""


class TrajectoryMemoryError(EsAgentError, ValueError):
    """A serialised trajectory memory (:mod:`es_agent.memory`) that cannot be read; the message names what is
    wrong."""
