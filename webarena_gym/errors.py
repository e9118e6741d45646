"""Typed errors of :mod:`webarena_gym`. Agent mistakes are observations, never exceptions; these are for
infrastructure failures and bad configuration."""

from __future__ import annotations


class WebArenaGymError(Exception):
    """Base class of every error raised by :mod:`webarena_gym`."""


class TaskConfigError(WebArenaGymError):
    """A task file or task entry is malformed. Names the file, the task and the field."""

    def __init__(self, message: str, *, task_id: object = None, field: str | None = None,
                 path: str | None = None) -> None:
        self.task_id = task_id
        self.field = field
        self.path = path
        where = []
        if path is not None:
            where.append(f"file {path!s}")
        if task_id is not None:
            where.append(f"task {task_id!r}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = f"[{', '.join(where)}] " if where else ""
        super().__init__(prefix + message)


class SiteConfigError(WebArenaGymError):
    """A site URL is missing or malformed (e.g. a task needs ``__GITLAB__`` and no GitLab URL is
    configured)."""


class BrowserError(WebArenaGymError):
    """The browser could not be launched, or crashed and could not be recovered within the bounded retries."""


class EvaluatorError(WebArenaGymError):
    """An evaluator could not score an episode for a reason that is not the agent's fault (e.g. a helper
    endpoint of the site is unreachable). Never turned into a silent reward of 0."""


class ResetArgumentError(WebArenaGymError, ValueError):
    """A ``reset()`` argument (``seed`` or ``options``) is malformed. Names the argument and its value; the
    env is left exactly as it was before the call."""
