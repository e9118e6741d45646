"""The exceptions of :mod:`cotrain`: one base class, one subclass per kind of failure a user can act on."""

from __future__ import annotations


class CotrainError(Exception):
    """Base class of every error raised by :mod:`cotrain` on purpose."""


class ConfigError(CotrainError, ValueError):
    """A configuration value is wrong: an unknown key, a wrong type, a value out of range (names the key path
    and what was expected)."""


class RunDirError(CotrainError):
    """A run directory is missing, foreign, corrupt, or not in the state an operation needs (names the
    file)."""


class CheckpointError(CotrainError):
    """A checkpoint needed to rebuild a run's state is missing or unreadable (names the file)."""


class RunIntegrityError(CheckpointError):
    """A run file does not match the digest recorded for it (a snapshot, a line of the update log, the
    config): it changed after it was written. Names the file and the generation."""


class DistributionError(CotrainError, ValueError):
    """A search distribution was asked for something it cannot do: bad hyperparameters, rows or rewards of
    the wrong shape, a serialised state that does not fit (names the value and what was expected)."""


class MetricsError(CotrainError, ValueError):
    """Generation metrics cannot be read or plotted: a row that is not a status dict, or no generation at all
    (names the row or the source)."""


class GridStatsError(CotrainError, ValueError):
    """Learning-grid outcomes that cannot be summarised: empty, not finite, or of shapes that do not pair."""


class GridConfigError(ConfigError):
    """A learning-grid file is wrong: an unknown or mistyped key, an arm whose overrides do not make a valid
    run config, or arms of unequal rollout budgets (names the key or the arms and their numbers)."""


class GridError(CotrainError):
    """A learning-grid directory or result cannot be used: a result file made with other overrides than the
    grid plans now, a corrupt result, a run that failed (names the file or the run)."""
