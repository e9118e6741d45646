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


class ReferenceSolutionError(WebArenaGymError):
    """A reference solution could not be replayed: a target is not on the page, an action failed, or the
    episode ended early. The message shows the step and the lines of the tree that came closest."""


class ActionParseError(WebArenaGymError, ValueError):
    """The text is not a valid action of the grammar. The message names the problem and quotes the text."""


class ActionError(WebArenaGymError):
    """The action could not be carried out for a reason the agent can see and fix (shown as
    ``last_action_error``)."""


class ActionTimeoutError(ActionError):
    """The action ran past its time budget and was cut off; the page is as far as the action got."""


class LoginError(WebArenaGymError):
    """The site refused the credentials or could not be reached."""


class SiteStartError(WebArenaGymError):
    """The embedded sites could not be started, reset or reached (the message includes the server log's
    tail)."""


class HelperCallError(WebArenaGymError, ValueError):
    """A ``func:`` expression is not a call of a whitelisted helper with valid arguments."""
