"""``WebArenaLiteEnv``: WebArena(-Lite) tasks as a Gymnasium environment on a real Chromium."""

from __future__ import annotations

import copy
import dataclasses
import math
import numbers
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium import spaces

from webarena_gym.actions import (
    DEFAULT_ACTION_TIMEOUT_S,
    TYPING_MODES,
    Action,
    ActionError,
    ActionParseError,
    ClickAction,
    GotoAction,
    HoverAction,
    StopAction,
    TypeAction,
    execute_action,
    parse_action,
)
from webarena_gym.browser import BrowserConfig, BrowserSession, cdp_send_with_titles, resolve_storage_state
from webarena_gym.display import EMBEDDED_SHOWN_SITES, URLDisplay
from webarena_gym.errors import (
    BrowserError,
    EvaluatorError,
    ResetArgumentError,
    SiteConfigError,
    TaskConfigError,
)
from webarena_gym.observation import (
    SNAPSHOT_CALL,
    ElementIds,
    PrintableText,
    format_axtree,
    format_tabs,
    to_printable,
    truncate,
    visible_in_snapshot,
)
from webarena_gym.progress import ReferenceProgress
from webarena_gym.safety import OriginPolicy

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from webarena_gym.embedded import EmbeddedWorld
    from webarena_gym.evaluators import EvalResult, Evaluator, Judge
    from webarena_gym.tasks import SiteURLs, TaskConfig

__all__ = ["RESET_OPTIONS", "TYPING_OPTIONS", "WebArenaLiteEnv"]

URL_MAX_CHARS = 4096
GOAL_MAX_CHARS = 4096
TABS_MAX_CHARS = 4096
ERROR_MAX_CHARS = 2048
ACTION_MAX_CHARS = 4096
_OBSERVE_ATTEMPTS = 3
RESET_OPTIONS = ("task_id",)
"""The keys ``reset(options=...)`` understands; any other key is a :class:`ResetArgumentError`."""
TYPING_OPTIONS = ("auto", *TYPING_MODES)
"""Values of the env's ``typing`` argument: ``"auto"`` (``"fill"`` on the embedded sites, ``"keys"``
elsewhere), ``"keys"`` (key by key, as WebArena) or ``"fill"`` (all at once, as Playwright's ``fill``)."""


class WebArenaLiteEnv(gym.Env[dict[str, str], str]):
    """WebArena(-Lite) web tasks in a real Chromium, with WebArena's observations, actions and evaluators.

    ## Description
    Each episode is one task in WebArena's JSON format: the browser opens the task's start URL(s) in a fresh
    context and the agent works through text actions until it answers with ``stop [answer]``. The sites are a
    real WebArena deployment (URLs from ``SHOPPING``/``WA_SHOPPING``... or ``sites=``) or the embedded ones.
    The browser only reaches the configured site origins.

    ## Action Space
    ``PrintableText(4096)``: one action of WebArena's id-based grammar: ``click [id]``, ``type [id] [text]
    [0|1]``, ``hover [id]``, ``press [key_comb]``, ``scroll [up|down]``, ``new_tab``, ``tab_focus [i]``,
    ``close_tab``, ``goto [url]``, ``go_back``, ``go_forward``, ``stop [answer]``. Malformed or failing
    actions are not errors: they come back as ``last_action_error`` and the episode goes on. An action outside
    the space (not a ``str``, longer than 4096 characters, or with a character that is not printable, tab or
    newline) is refused unrun, in ``last_action_error``, and counts as a parse failure. Each action has
    ``action_timeout_s`` seconds: one that runs longer is cut off where it got to (the tab stops loading) and
    ``last_action_error`` says it exceeded its timeout.

    ## Observation Space
    ``Dict`` of printable-Unicode ``Text`` fields: ``axtree`` (the accessibility tree, WebArena-style
    ``[id] role 'name' props`` lines, tab-indented, at most ``max_axtree_chars``), ``url``, ``goal`` (the task
    intent), ``tabs`` (``Tab 0 (current): <title>`` per line) and ``last_action_error`` (empty after a good
    action). The embedded sites listen on free ports, so their addresses are shown under fixed ones
    (``http://localhost:7770`` shop, ``:7780`` admin, ``:9999`` forum; ``goto`` accepts those): the same
    episode reads the same in every process (``webarena_gym.display``). Real deployments are shown as they
    are.

    ## Rewards
    0 on every step except the last, which gets the task evaluator's score in [0, 1] (``string_match``,
    ``url_match``, ``program_html``, multiplied as in WebArena); details in ``info["eval"]``.
    With ``progress_reward`` p > 0 (a training signal, default 0), each action that follows the next step of
    the task's ``reference_solution`` also earns ``p / n`` (``n``: its steps before the final ``stop``; the
    first action that does not follow ends it; :mod:`webarena_gym.progress`), and ``info`` carries
    ``reference_progress`` (the followed fraction). An episode's reward is then at least 1 exactly when the
    evaluator scored it 1 (scores are 0 or 1, p < 1), so success rates read the same.

    ## Starting State
    The task is ``options["task_id"]`` or drawn with ``self.np_random`` from the task set; its start URL(s)
    open in new tabs (`` |AND| `` gives several), logged in through the task's storage state when it needs
    one. ``seed`` and ``options`` are checked before anything changes: a bad one (a seed that is not a
    non-negative integer, options that are not a dict, an unknown key, a ``task_id`` that is not an integer)
    raises :class:`~webarena_gym.errors.ResetArgumentError`, an id outside the task set
    :class:`~webarena_gym.errors.TaskConfigError`, and the env is left as it was (a running episode goes on).
    After :meth:`close`, ``reset`` and ``step`` raise ``gymnasium.error.ClosedEnvironmentError``.

    ## Episode End
    Terminated on ``stop [answer]`` and on WebArena's early-stop rules (``parsing_failure_threshold``
    consecutive unparseable actions; the same action ``repeating_action_threshold`` times in a row, or the
    same ``type`` target that many times in the episode). Truncated by the ``TimeLimit`` of the registration
    (``max_episode_steps=30``, or ``gym.make(..., max_episode_steps=N)``). The registration puts
    :class:`~webarena_gym.wrappers.EvaluateOnTruncation` outside that ``TimeLimit``: on the truncated step it
    asks the env to score the episode (:meth:`end_episode`), so a truncated episode carries the evaluator's
    score whatever the limit, never a silent 0. Constructed directly (without ``gym.make``), the env truncates
    and scores at ``max_steps`` itself when that is given. Browser
    crashes raise :class:`~webarena_gym.errors.BrowserError`; the next ``reset`` relaunches the browser.

    ## Arguments
    ``task_file``: task JSON path, a list of task dicts or of ``TaskConfig`` (default: the embedded world,
    the bundled task set on the embedded sites, started at the first reset and pristine at every reset).
    ``tasks``: task ids to keep. ``split``: keep tasks whose ``split`` field equals it (default world:
    ``"train"`` unless given; ``"all"`` for every split). ``sites``: site URLs
    overriding the environment (``{"shopping": "http://..."}`` or a ``SiteURLs``). ``browser``:
    ``BrowserConfig`` or dict. ``eval_rules``: ``"webarena"`` or ``"webarena_lite"``. ``judge``: judge for
    ``fuzzy_match``. ``accounts``: site accounts for evaluation helpers. ``max_axtree_chars``: tree text
    bound. ``viewport_only``: show only nodes in the viewport. ``allowed_origins``: extra origins the browser
    may reach. ``auth_dir``: folder of the storage-state files. ``render_mode``: ``"ansi"`` (tree text) or
    ``"rgb_array"``. ``parsing_failure_threshold``, ``repeating_action_threshold``: early-stop rules (``None``
    disables). ``max_steps``: a step limit enforced (and scored) by the env itself, for use without
    ``gym.make``; leave it ``None`` under ``gym.make``, whose ``TimeLimit`` and ``EvaluateOnTruncation``
    do it. ``action_timeout_s``: the time budget of one action in seconds (default 30; a positive finite
    number); ``browser.action_timeout_ms`` and ``navigation_timeout_ms`` still bound each page operation and
    navigation inside it. ``typing``: how ``type`` enters its text: ``"keys"`` key by key as WebArena does
    (a key event per character, for pages that listen to them: a real deployment's search suggestions),
    ``"fill"`` all at once as Playwright's ``fill`` does (one ``input`` event, one round trip whatever the
    length), or ``"auto"`` (default): ``"fill"`` on the embedded sites, whose pages run no scripts and end up
    in the same state either way (tested on every bundled task that types), ``"keys"`` on anything else.
    Both modes click the field, replace its content and press a real Enter when the action asks for it;
    :attr:`typing_mode` is the mode in use.
    ``progress_reward``: reward for following the reference solution, in [0, 1) (default 0: off;
    see Rewards); a task without a ``reference_solution`` is refused at ``reset`` while it is on.

    ## Version History
    * v0: initial version.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    world: EmbeddedWorld | None = None
    """The embedded sites of an env made without ``task_file`` (``None`` otherwise)."""

    def __init__(
        self,
        task_file: str | Path | Sequence[Mapping[str, Any]] | Sequence[TaskConfig] | None = None,
        *,
        tasks: Iterable[int] | None = None,
        sites: Mapping[str, str] | SiteURLs | None = None,
        split: str | None = None,
        browser: BrowserConfig | Mapping[str, Any] | None = None,
        eval_rules: str = "webarena",
        judge: Judge | None = None,
        accounts: Mapping[str, Mapping[str, str]] | None = None,
        max_axtree_chars: int = 40_000,
        viewport_only: bool = False,
        allowed_origins: Iterable[str] = (),
        auth_dir: str | Path | None = None,
        render_mode: str | None = None,
        parsing_failure_threshold: int | None = 3,
        repeating_action_threshold: int | None = 3,
        max_steps: int | None = None,
        action_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S,
        typing: str = "auto",
        progress_reward: float = 0.0,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        if eval_rules not in ("webarena", "webarena_lite"):
            raise ValueError(f"eval_rules must be 'webarena' or 'webarena_lite', got {eval_rules!r}")
        if not isinstance(max_axtree_chars, int) or max_axtree_chars < 200:
            raise ValueError(f"max_axtree_chars must be an integer >= 200, got {max_axtree_chars!r}")
        limits = (("parsing_failure_threshold", parsing_failure_threshold),
                  ("repeating_action_threshold", repeating_action_threshold), ("max_steps", max_steps))
        for name, value in limits:
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        if isinstance(action_timeout_s, bool) or not isinstance(action_timeout_s, numbers.Real) \
                or not math.isfinite(action_timeout_s) or action_timeout_s <= 0:
            raise ValueError(f"action_timeout_s must be a positive finite number of seconds, got "
                             f"{action_timeout_s!r}")
        if not isinstance(typing, str) or typing not in TYPING_OPTIONS:
            raise ValueError(f"typing must be one of {list(TYPING_OPTIONS)}, got {_shown(typing)}")
        if isinstance(progress_reward, bool) or not isinstance(progress_reward, numbers.Real) \
                or not math.isfinite(progress_reward) or not 0 <= progress_reward < 1:
            raise ValueError(f"progress_reward must be a number in [0, 1), got {_shown(progress_reward)}")
        self.progress_reward: float = float(progress_reward)
        """Reward for following the task's reference solution (:mod:`webarena_gym.progress`; 0: off)."""
        self.action_timeout_s: float = float(action_timeout_s)
        self.render_mode: str | None = render_mode
        self.eval_rules: str = eval_rules
        self.judge: Judge | None = judge
        self.accounts: dict[str, Mapping[str, str]] = dict(accounts or {})
        self.max_axtree_chars: int = max_axtree_chars
        self.viewport_only: bool = viewport_only
        self.auth_dir: str | Path | None = auth_dir
        self.parsing_failure_threshold: int | None = parsing_failure_threshold
        self.repeating_action_threshold: int | None = repeating_action_threshold
        self.max_steps: int | None = max_steps
        self.browser_config: BrowserConfig = BrowserConfig.from_value(browser)

        world_sites = None
        if task_file is None:
            task_list, world_sites = self._default_world(split, sites)
            split = None  # the default world's task list is the split already
        else:
            task_list = _load(task_file)
        self.tasks: list[TaskConfig] = _select(task_list, tasks, split)
        self.typing_mode: str = ("fill" if self.world is not None else "keys") if typing == "auto" else typing
        """How ``type`` enters text in this env (``typing`` with ``"auto"`` resolved)."""
        self._task_index: dict[int, TaskConfig] = {t.task_id: t for t in self.tasks}
        self._extra_origins: tuple[str, ...] = tuple(allowed_origins)
        self.sites: SiteURLs = _site_urls(sites, world_sites)
        self.policy: OriginPolicy = OriginPolicy([*_site_list(self.sites), *self._extra_origins])

        self.observation_space = spaces.Dict({
            "axtree": PrintableText(max_axtree_chars),
            "url": PrintableText(URL_MAX_CHARS),
            "goal": PrintableText(GOAL_MAX_CHARS),
            "tabs": PrintableText(TABS_MAX_CHARS),
            "last_action_error": PrintableText(ERROR_MAX_CHARS),
        })
        self.action_space: PrintableText = PrintableText(ACTION_MAX_CHARS)

        self.display: URLDisplay = URLDisplay.identity()
        """How site addresses are shown to the agent (fixed addresses for the embedded sites' free ports)."""
        self._session: BrowserSession = BrowserSession(self.browser_config, self.policy)
        self._task: TaskConfig | None = None
        self._evaluator: Evaluator | None = None
        self._active: bool = False
        self._ids: ElementIds = ElementIds()
        self._id_map: dict[int, int] = {}
        self._obs: dict[str, str] | None = None
        self._steps: int = 0
        self._parse_failures: int = 0
        self._history: list[tuple[Any, ...]] = []
        self._actions: list[str] = []
        self._progress: ReferenceProgress | None = None
        self._closed: bool = False

    # ----- world -------------------------------------------------------------------------------------------
    def _default_world(self, split: str | None, sites: Any) -> tuple[list[TaskConfig], SiteURLs | None]:
        """Tasks and site URLs used when no ``task_file`` is given: the bundled embedded task set (``split``:
        ``"train"`` by default, ``"test"``, ``"test_unseen"``, or ``"all"``) on the embedded sites of
        :attr:`world`, started at the first reset (the URLs are empty until then). Without a ``judge``, the
        offline fallback judge scores the answers of unachievable (N/A) tasks."""
        from webarena_gym.embedded import EmbeddedWorld, default_tasks
        from webarena_gym.evaluators import OfflineJudge
        from webarena_gym.tasks import SiteURLs

        if sites is not None:
            raise ValueError("sites= needs a task_file: without one the env runs its own embedded sites")
        self.world = EmbeddedWorld()
        if self.judge is None:
            self.judge = OfflineJudge()
        return default_tasks(split), SiteURLs()

    def _before_episode(self, task: TaskConfig) -> None:
        """Called by :meth:`reset` before anything of ``task`` is resolved or opened: the place to restore
        site state and, for sites started lazily, to announce their URLs with :meth:`_use_sites`. The default
        world starts its sites on first use, restores their pristine state and writes the task's login
        storage state (into its own ``auth_dir``). Real WebArena deployments are reset by their operators."""
        if self.world is None:
            return
        if not self.world.started:
            self._use_sites(self.world.start())
        self.world.prepare(task)
        self.auth_dir = self.world.auth_dir

    def _reference_progress(self, task: TaskConfig) -> ReferenceProgress:
        """A fresh tracker of ``task``'s reference solution (``progress_reward``); a task without one is a
        :class:`~webarena_gym.errors.TaskConfigError`."""
        steps = task.extras.get("reference_solution")
        if not isinstance(steps, list) or not steps:
            raise TaskConfigError(f"task {task.task_id} has no reference_solution, and progress_reward="
                                  f"{self.progress_reward} rewards following it: set progress_reward=0 for "
                                  "tasks without one (a real WebArena deployment)", task_id=task.task_id,
                                  field="reference_solution")
        return ReferenceProgress(steps, resolve=self.sites.resolve, unshow=self.display.unshow)

    def _use_sites(self, sites: SiteURLs) -> None:
        """Switch to these site URLs; the origin policy follows (from the next episode on)."""
        self.sites = sites
        self.policy = OriginPolicy([*_site_list(sites), *self._extra_origins])
        self._session.policy = self.policy
        if self.world is not None:  # free ports, chosen per process: show fixed addresses instead
            self.display = URLDisplay.from_sites(sites.as_dict(), EMBEDDED_SHOWN_SITES)

    def end_episode(self, reason: str = "max_steps") -> tuple[float, dict[str, Any]]:
        """Score the running episode now and end it (used when a wrapper truncates it): returns the
        evaluator's score and its details. Raises ``ResetNeeded`` when no episode is running."""
        self._check_open()
        if not self._active or self._task is None:
            raise gym.error.ResetNeeded("no running episode to score: call reset() first")
        self._active = False
        result = self._evaluate(None, reason, None)
        return float(result.score), copy.deepcopy(result.details)

    def reference_trajectory(self, task_id: int, seed: int | None = None
                             ) -> tuple[list[str], list[dict[str, Any]]]:
        """Replay task ``task_id``'s reference solution in a new episode reset with ``seed`` and return its
        actions and the observation each was taken on (:func:`webarena_gym.reference.record_solution`): what
        teacher-forced scoring of a policy needs (``es_agent.reference_credit``). Ends that episode; a task
        without a working reference solution raises :class:`~webarena_gym.errors.ReferenceSolutionError`."""
        from webarena_gym.reference import record_solution

        result, observations = record_solution(self, self._pick_task(task_id), seed=seed)
        return list(result.actions), observations

    def answer_accepted(self, task_id: int, answer: str) -> bool:
        """Whether ``stop [answer]`` answers task ``task_id`` right by its ``string_match`` evaluator, under
        this env's sites, judge and rules, without a page (any answer when the task is not scored by it)."""
        from webarena_gym.evaluators import answer_accepted

        return answer_accepted(self._pick_task(task_id), answer, self.sites, self.judge,
                               self.eval_rules)  # type: ignore[arg-type]

    @property
    def task(self) -> TaskConfig | None:
        """The task of the current episode."""
        return self._task

    @property
    def browser_relaunches(self) -> int:
        """How many times a crashed browser was relaunched."""
        return self._session.relaunches

    # ----- Gymnasium API -----------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[str, str], dict[str, Any]]:
        """Start an episode on ``options["task_id"]`` (or a task drawn with ``np_random``); bad arguments
        raise before anything changes (see the class docstring)."""
        self._check_open()
        seed, task = self.check_reset_arguments(seed=seed, options=options)
        super().reset(seed=seed)
        if task is None:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        progress = self._reference_progress(task) if self.progress_reward else None
        from webarena_gym.evaluators import build_evaluator

        evaluator = build_evaluator(task, nav_timeout_ms=self.browser_config.navigation_timeout_ms)
        self._active = False
        self._before_episode(task)
        start_urls = [self.sites.resolve(url) for url in task.start_urls]
        storage_state = None
        if task.require_login and task.storage_state:
            storage_state = resolve_storage_state(task.storage_state, self.auth_dir)
        relaunches = self._session.relaunches
        self._session.new_episode(storage_state=storage_state, geolocation=task.geolocation)
        self._open_start_urls(start_urls)
        self._task, self._evaluator = task, evaluator
        self._ids = ElementIds()
        self._steps = self._parse_failures = 0
        self._history, self._actions = [], []
        self._progress = progress
        self._active = True
        obs = self._observe("")
        relaunched = self._session.relaunches > relaunches
        error = "the browser had crashed and was relaunched" if relaunched else None
        info = {"task_id": task.task_id, "intent": task.intent, "sites": list(task.sites),
                "start_url": " |AND| ".join(start_urls), "error": error}
        if progress is not None:
            info["reference_progress"] = progress.fraction
        return obs, info

    def check_reset_arguments(self, *, seed: Any = None, options: Any = None,
                              ) -> tuple[int | None, TaskConfig | None]:
        """Check ``reset``'s arguments without changing anything: the seed as an ``int`` (or ``None``) and the
        task asked for by ``options["task_id"]`` (``None``: draw one). Raises
        :class:`~webarena_gym.errors.ResetArgumentError` or, for an id outside the task set,
        :class:`~webarena_gym.errors.TaskConfigError`."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                                 or seed < 0):
            raise ResetArgumentError(f"reset(seed=...) must be None or a non-negative integer, got "
                                     f"{_shown(seed)} ({type(seed).__name__})")
        if options is None:
            return (None if seed is None else int(seed)), None
        if not isinstance(options, Mapping):
            raise ResetArgumentError(f"reset(options=...) must be None or a dict, got "
                                     f"{_shown(options)} ({type(options).__name__})")
        unknown = [key for key in options if key not in RESET_OPTIONS]
        if unknown:
            raise ResetArgumentError(f"unknown reset option(s) {_shown(unknown)} in options; the env "
                                     f"understands {list(RESET_OPTIONS)}")
        task_id = options.get("task_id")
        task = None if task_id is None else self._pick_task(task_id)
        return (None if seed is None else int(seed)), task

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        """Run one action; see the class docstring for rewards and episode end."""
        self._check_open()
        if not self._active or self._task is None:
            raise gym.error.ResetNeeded("the episode is over or was never started: call reset() before "
                                        "step()")
        try:
            self._session.check_alive(probe=False)  # a browser that died unnoticed fails the first call
        except BrowserError:
            self._active = False
            raise
        self._steps += 1
        error = ""
        parsed: Action | None = None
        refusal = _action_refusal(action, self.action_space)
        if refusal is not None:  # outside the action space: not run, and counted as a parse failure
            error = f"invalid action: {refusal}"
            self._parse_failures += 1
            shown = to_printable(action[:200]) if isinstance(action, str) else type(action).__name__
            self._actions.append(f"<refused> {shown}")
        else:
            try:
                parsed = parse_action(action)
                self._parse_failures = 0
            except ActionParseError as exc:
                error = f"invalid action: {exc}"
                self._parse_failures += 1
            self._actions.append(str(parsed) if parsed is not None else f"<unparsed> {action[:200]}")
        self._history.append(_equivalence_key(parsed))
        reward = 0.0
        if self._progress is not None and self._obs is not None \
                and self._progress.advance(parsed, self._obs["axtree"]):
            reward = self.progress_reward / self._progress.total
        end, answer, early_stop = None, None, None
        if isinstance(parsed, StopAction):
            end, answer = "stop", parsed.answer
        elif parsed is not None:
            if isinstance(parsed, GotoAction):
                parsed = GotoAction(self.display.unshow(parsed.url))
            try:
                execute_action(parsed, self._session, self._id_map, timeout_s=self.action_timeout_s,
                               typing=self.typing_mode)
            except ActionError as exc:
                error = str(exc)
            except BrowserError:
                self._active = False
                raise
        if end is None:
            early_stop = self._early_stop_reason()
            if early_stop is not None:
                end = "early_stop"
        if end is None and self.max_steps is not None and self._steps >= self.max_steps:
            end = "max_steps"
        try:
            obs = self._observe(error)
        except BrowserError:
            self._active = False
            raise
        info: dict[str, Any] = {"task_id": self._task.task_id, "action": self._actions[-1],
                                "parsed": parsed is not None, "step": self._steps, "episode_end": end,
                                "early_stop": early_stop, "error": None}
        if self._progress is not None:
            info["reference_progress"] = self._progress.fraction
        if end is not None:
            self._active = False
            result = self._evaluate(answer, end, early_stop)
            reward += float(result.score)
            info["eval"] = copy.deepcopy(result.details)
        return obs, reward, end in ("stop", "early_stop"), end == "max_steps", info

    def render(self) -> str | np.ndarray | None:
        """``"ansi"``: the accessibility tree text; ``"rgb_array"``: a screenshot (H, W, 3) of the tab."""
        if self.render_mode == "ansi":
            return self._obs["axtree"] if self._obs is not None else ""
        if self.render_mode == "rgb_array":
            if self._task is None or not self._session.browser_alive():
                return None
            import io

            import numpy as np
            from PIL import Image

            png = self._session.screenshot()
            return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.uint8)
        return None

    def close(self) -> None:
        """Close the browser; safe to call more than once. The env cannot be reset after it."""
        self._closed = True
        self._active = False
        self._session.close()
        if self.world is not None:
            self.world.close()
        super().close()

    # ----- internals ---------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise gym.error.ClosedEnvironmentError("this env was closed (its browser and sites are gone): "
                                                   "make a new one")

    def _pick_task(self, task_id: Any) -> TaskConfig:
        """The task with this id; the id must be an integer (``numpy`` integers too, not ``bool``)."""
        if isinstance(task_id, bool) or not isinstance(task_id, numbers.Integral):
            raise ResetArgumentError(f"options['task_id'] must be an integer task id, got "
                                     f"{_shown(task_id)} ({type(task_id).__name__})")
        task_id = int(task_id)
        task = self._task_index.get(task_id)
        if task is None:
            shown = sorted(self._task_index)[:20]
            raise TaskConfigError(f"options['task_id']={_shown(task_id)} is not in this env's task set "
                                  f"(ids: {shown}{'...' if len(self._task_index) > 20 else ''})")
        return task

    def _open_start_urls(self, urls: list[str]) -> None:
        from playwright.sync_api import Error as PlaywrightError

        if not urls:
            self._session.new_tab()
            return
        for url in urls:
            refusal = self.policy.navigation_refusal(url)
            if refusal is not None:
                raise SiteConfigError(f"start URL refused by the origin policy: {refusal}")
            try:
                self._session.open(url)
            except PlaywrightError as exc:
                self._session.check_alive()
                raise SiteConfigError(f"could not open start URL {url!r}: {str(exc).splitlines()[0]}; "
                                      "is the site running?") from exc
        self._session.set_current(self._session.pages[0])

    def _observe(self, error: str) -> dict[str, str]:
        from playwright.sync_api import Error as PlaywrightError

        session = self._session
        viewport = ((self.browser_config.viewport_width, self.browser_config.viewport_height)
                    if self.viewport_only else None)
        for attempt in range(_OBSERVE_ATTEMPTS):
            try:
                page = session.page
                tab = session.tab(page)
                pages = session.pages
                calls = [("Accessibility.getFullAXTree", {}), *([SNAPSHOT_CALL] if viewport else [])]
                replies, titles = cdp_send_with_titles(tab.cdp, calls, pages)  # one round trip for all
                visible = visible_in_snapshot(replies[1], viewport) if viewport else None
                tree = format_axtree(replies[0]["nodes"], self._ids, tab_key=tab.key, visible=visible,
                                     document_key=tab.document, max_chars=self.max_axtree_chars)
                tabs = format_tabs(titles, pages.index(page) if page in pages else -1)
                url = page.url
                break
            except PlaywrightError as exc:
                session.check_alive()
                if attempt + 1 == _OBSERVE_ATTEMPTS:
                    raise BrowserError(f"could not read the current page: {exc}") from exc
                current = session.page
                if not current.is_closed():
                    session.settle(current)
        self._id_map = tree.id_map
        assert self._task is not None
        show = self.display.show
        self._obs = {
            "axtree": show(tree.text),
            "url": truncate(to_printable(show(url)), URL_MAX_CHARS),
            "goal": truncate(to_printable(self._task.intent, keep="\n\t"), GOAL_MAX_CHARS),
            "tabs": truncate(show(tabs), TABS_MAX_CHARS),
            "last_action_error": truncate(to_printable(show(error), keep="\n\t"), ERROR_MAX_CHARS),
        }
        return dict(self._obs)

    def _early_stop_reason(self) -> str | None:
        """WebArena's ``early_stop`` rules (run.py), checked after each action."""
        k = self.parsing_failure_threshold
        if k is not None and self._parse_failures >= k:
            return f"Failed to parse actions for {k} times"
        k = self.repeating_action_threshold
        if k is None or not self._history:
            return None
        last = self._history[-1]
        if last[0] == "type":
            if sum(key == last for key in self._history) >= k:
                return f"Same typing action for {k} times"
        elif len(self._history) >= k and all(key == last for key in self._history[-k:]):
            return f"Same action for {k} times"
        return None

    def _evaluate(self, answer: str | None, end: str, early_stop: str | None) -> EvalResult:
        from playwright.sync_api import Error as PlaywrightError

        from webarena_gym.evaluators import EvalContext

        assert self._task is not None and self._evaluator is not None
        session = self._session
        ctx = EvalContext(
            answer=answer, page=session.page, context=session.context, sites=self.sites, judge=self.judge,
            rules=self.eval_rules,  # type: ignore[arg-type]
            intent=self._task.intent,
            extra={"action_history": list(self._actions), "episode_end": end, "early_stop": early_stop},
            accounts=self.accounts,
        )
        try:
            return self._evaluator(ctx)
        except EvaluatorError:
            session.check_alive()  # a dead browser is the real cause: say so
            raise
        except PlaywrightError as exc:
            session.check_alive()
            raise EvaluatorError(f"evaluating task {self._task.task_id} failed in the browser: "
                                 f"{exc}") from exc


def _shown(value: object) -> str:
    """A short ``repr`` for messages about a caller's bad value, which may be huge or even refuse ``repr``."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of {value.bit_length()} bits>"  # repr() refuses ints over 4,300 digits
    try:
        return reprlib.repr(value)
    except Exception:  # a hostile __repr__: name the type instead
        return f"<a {type(value).__name__} whose repr() fails>"


def _action_refusal(action: object, space: PrintableText) -> str | None:
    """Why ``action`` is outside the action space (``None`` when it is inside)."""
    if not isinstance(action, str):
        return f"an action must be a str, got {type(action).__name__}"
    if len(action) > space.max_length:
        return (f"the action has {len(action)} characters; the action space allows at most "
                f"{space.max_length} characters")
    if not space.contains(action):
        position, char = next((i, c) for i, c in enumerate(action) if c not in space.character_set)
        return (f"character U+{ord(char):04X} at position {position} is not allowed in an action (the action "
                "space holds printable characters, tab and newline)")
    return None


def _equivalence_key(action: Action | None) -> tuple[Any, ...]:
    """What WebArena's ``is_equivalent`` compares (element actions: the element id only)."""
    if action is None:
        return ("none",)
    if isinstance(action, (ClickAction, HoverAction, TypeAction)):
        return (action.name, action.element_id)
    return (action.name, *dataclasses.astuple(action))


def _load(task_file: Any) -> list[TaskConfig]:
    from webarena_gym.tasks import TaskConfig, load_tasks

    if isinstance(task_file, Sequence) and not isinstance(task_file, str) and task_file \
            and all(isinstance(t, TaskConfig) for t in task_file):
        return list(task_file)
    return load_tasks(task_file)


def _site_urls(sites: Any, world_sites: SiteURLs | None) -> SiteURLs:
    from webarena_gym.tasks import SiteURLs

    if isinstance(sites, SiteURLs):
        return sites
    base = world_sites if world_sites is not None else SiteURLs.from_env()
    if sites is None:
        return base
    if not isinstance(sites, Mapping):
        raise TypeError(f"sites must be a dict of site URLs or a SiteURLs, got {type(sites).__name__}")
    return base.with_overrides(sites)


def _select(task_list: list[TaskConfig], task_ids: Iterable[int] | None,
            split: str | None) -> list[TaskConfig]:
    selected = task_list
    if split is not None:
        selected = [t for t in selected if t.extras.get("split") == split]
        if not selected:
            splits = sorted({str(t.extras.get("split")) for t in task_list})
            raise TaskConfigError(f"no task has split {split!r} (splits present: {splits})")
    if task_ids is not None:
        wanted = list(task_ids)
        by_id = {t.task_id: t for t in selected}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise TaskConfigError(f"tasks {missing} are not in the task set")
        selected = [by_id[i] for i in wanted]
    if not selected:
        raise TaskConfigError("the task set is empty")
    return selected


def _site_list(sites: SiteURLs) -> list[str]:
    """The configured site URLs in WebArena's site order (a stable order for messages)."""
    return list(sites.as_dict().values())
