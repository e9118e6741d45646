"""Observation-extraction time and env steps per second of ``WebArenaLiteEnv`` on local pages.

Figures (median over N runs, spread = p90 - p10):
- ms per observation (``Accessibility.getFullAXTree`` + flattening) on a small page and on a 120-product
  catalog page (about 2,200 accessibility nodes, a WebArena listing page's order of magnitude), plus the
  viewport-filtered variant on the catalog (goal: a tenth of the next figure, measured in the same run);
- for comparison, WebArena's approach on the catalog: one ``getBoundingClientRect`` round trip per node;
- env steps per second with a scripted policy (click, type, hover, scroll, go_back, press) on the small page;
- env steps per second replaying the bundled reference solutions on the embedded sites (the first train tasks
  whose solution types; only ``env.step`` timed, observation included) side by side in one env: typing
  ``"fill"`` (the embedded default) vs ``"keys"`` (WebArena's key by key), and ``"fill"`` with the per-step
  round trips as they were before they were cut (a CDP probe before every action, the history of every tab
  read after it, one title call per tab, driver polls while a page loads; restored by patching the session
  for those runs only), runs interleaved, rate per task, ratios per repetition; with the blocking driver
  calls per step of each (a count, the same on a busy machine);
- the embedded world: ``EmbeddedSites.reset()`` (pristine state) in ms, a full env ``reset`` on a bundled task
  (sites reset + fresh login + new browser context + start page + observation) in ms, and pages served per
  second by the embedded sites (GET of a fixed mix of shop, admin and forum pages over 2 client threads).

Pages are generated into a temporary folder and served by a local HTTP server on 127.0.0.1.
``python -m benchmarks.bench_env [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

OBS_GOAL_MS = 100.0
"""Small pages: well under 100 ms per observation."""
CATALOG_FRACTION = 0.1
"""Large pages: at most a tenth of WebArena's per-node approach, measured in the same run (load-robust)."""
STEPS_GOAL = 5.0

SMALL_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Bench home</title></head>
<body>
<nav><a href="/catalog.html">Catalog</a> <a href="/small.html?again=1">Home again</a></nav>
<h1>Bench shop</h1><p>Prices in € — café 東京</p>
<form action="/small.html" method="get" role="search"><label for="q">Search</label>
<input id="q" name="q" required><button type="submit">Go</button></form>
<div id="tip">Hover target</div><p id="out">idle</p>
<script>
const out = document.getElementById('out');
document.getElementById('tip').onmouseover = () => { out.textContent = 'hovered'; };
</script></body></html>"""


def _catalog_page(products: int = 120) -> str:
    cards = []
    for i in range(products):
        cards.append(
            f'<li class="card"><a href="/small.html?p={i}"><img alt="Product {i}" src="data:image/gif;base64,'
            f'R0lGODlhAQABAAAAACw="><span>Product number {i}: ergonomic widget, model {i * 7 % 13}</span></a>'
            f'<span class="price">${i * 3 + 9}.99</span>'
            f'<div class="rating" aria-label="Rating {i % 5 + 1} of 5">'
            f'{"★" * (i % 5 + 1)}</div><button type="button">Add to cart</button>'
            f'<button type="button" aria-label="Add product {i} to wish list">♡</button></li>'
        )
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Catalog</title></head><body>"
            "<header><nav><a href='/small.html'>Home</a></nav></header><h1>All products</h1>"
            "<label>Sort by <select><option>Position</option><option>Price</option></select></label>"
            f"<ul>{''.join(cards)}</ul><footer><p>Bench footer</p></footer></body></html>")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def _local_site() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="bench_env_") as folder:
        (Path(folder) / "small.html").write_text(SMALL_PAGE, encoding="utf-8")
        (Path(folder) / "catalog.html").write_text(_catalog_page(), encoding="utf-8")
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=folder))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}"
        finally:
            server.shutdown()
            server.server_close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _timed_ms(fn: Callable[[], Any], runs: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _latency_figure(name: str, samples: list[float], goal_ms: float | None, note: str = "") -> dict[str, Any]:
    median = statistics.median(samples)
    return {"name": name, "value": round(median, 2), "unit": "ms",
            "goal": f"< {goal_ms:g} ms" if goal_ms is not None else "reference" + note,
            "met": None if goal_ms is None else median < goal_ms,
            "spread": round(_percentile(samples, 0.9) - _percentile(samples, 0.1), 2),
            "p90": round(_percentile(samples, 0.9), 2)}


def bench_observation(base: str, runs: int, chromium: str | None,
                      compare_webarena: bool) -> list[dict[str, Any]]:
    """ms per observation on the small and the catalog page (and WebArena's per-node boxes, for
    comparison)."""
    from webarena_gym.browser import BrowserConfig, BrowserSession
    from webarena_gym.observation import ElementIds, fetch_axtree
    from webarena_gym.safety import OriginPolicy

    config = BrowserConfig(executable_path=chromium)
    session = BrowserSession(config, OriginPolicy([base]))
    figures = []
    try:
        session.new_episode()
        for page_name in ("small", "catalog"):
            page = session.open(f"{base}/{page_name}.html")
            tab = session.tab(page)
            viewports: list[tuple[str, tuple[int, int] | None]] = [("", None)]
            if page_name == "catalog":
                viewports.append((", viewport only", (config.viewport_width, config.viewport_height)))
            for label, viewport in viewports:
                def observe(tab: Any = tab, viewport: Any = viewport) -> Any:
                    return fetch_axtree(tab.cdp, ElementIds(), tab_key=tab.key, document_key=tab.document,
                                        max_chars=1_000_000, viewport=viewport)
                tree = observe()
                nodes = len(tab.cdp.send("Accessibility.getFullAXTree", {})["nodes"])
                goal = OBS_GOAL_MS if page_name == "small" else None
                samples = _timed_ms(observe, runs)
                figure = _latency_figure(f"observation, {page_name} page{label}", samples, goal)
                figure.update(ax_nodes=nodes, lines=tree.text.count("\n") + 1, chars=len(tree.text))
                figures.append(figure)
            if page_name == "catalog" and compare_webarena:
                reference = _webarena_boxes(tab.cdp, runs=max(2, runs // 10))
                for figure in figures:
                    if figure["name"].startswith("observation, catalog"):
                        limit = CATALOG_FRACTION * reference["value"]
                        figure["goal"] = (f"< {CATALOG_FRACTION:.0%} of WebArena's per-node boxes "
                                          f"({limit:.0f} ms)")
                        figure["met"] = figure["value"] < limit
                figures.append(reference)
    finally:
        session.close()
    return figures


_RECT = """function () {
  if (this.nodeType == 3) { const r = document.createRange(); r.selectNode(this);
    const b = r.getBoundingClientRect().toJSON(); r.detach(); return b; }
  return this.getBoundingClientRect().toJSON(); }"""


def _webarena_boxes(cdp: Any, runs: int) -> dict[str, Any]:
    """WebArena's viewport filtering: ``DOM.resolveNode`` + ``getBoundingClientRect`` for every node."""
    def per_node() -> None:
        for node in cdp.send("Accessibility.getFullAXTree", {})["nodes"]:
            backend = node.get("backendDOMNodeId")
            if backend is None:
                continue
            obj = cdp.send("DOM.resolveNode", {"backendNodeId": backend})["object"]["objectId"]
            cdp.send("Runtime.callFunctionOn", {"objectId": obj, "functionDeclaration": _RECT,
                                                "returnByValue": True})
    return _latency_figure("observation, catalog page, WebArena per-node boxes", _timed_ms(per_node, runs),
                           None, " (WebArena's approach, for comparison)")


def bench_steps(base: str, steps: int, chromium: str | None) -> list[dict[str, Any]]:
    """Env steps per second with a scripted policy on the small page (observation included)."""
    from webarena_gym.env import WebArenaLiteEnv

    task = {"task_id": 0, "sites": ["shopping"], "start_url": "__SHOPPING__/small.html", "intent": "bench",
            "eval": {"eval_types": ["url_match"], "reference_url": "__SHOPPING__/catalog.html"}}
    env = WebArenaLiteEnv([task], sites={"shopping": base}, browser={"executable_path": chromium},
                          repeating_action_threshold=None, parsing_failure_threshold=None)
    script = ["type [{search}] [widget] [0]", "hover [{tip}]", "scroll [down]", "scroll [up]",
              "press [Tab]", "click [{catalog}]", "go_back"]
    targets = {"search": "textbox 'Search'", "tip": "StaticText 'Hover target'", "catalog": "link 'Catalog'"}
    latencies: list[float] = []
    try:
        obs, _ = env.reset(seed=0)
        done = 0
        start_all = time.perf_counter()
        while done < steps:
            template = script[done % len(script)]
            ids = {key: _find(obs["axtree"], text) for key, text in targets.items()
                   if "{" + key + "}" in template}
            action = template.format(**ids)
            start = time.perf_counter()
            obs, _, terminated, _, _ = env.step(action)
            latencies.append((time.perf_counter() - start) * 1000)
            if obs["last_action_error"] or terminated:
                raise RuntimeError(f"scripted step {action!r} failed: {obs['last_action_error']}")
            done += 1
        elapsed = time.perf_counter() - start_all
        start = time.perf_counter()
        env.reset(seed=0)
        reset_ms = (time.perf_counter() - start) * 1000
    finally:
        env.close()
    rate = steps / elapsed
    return [
        {"name": "env steps per second, scripted policy, small page", "value": round(rate, 2),
         "unit": "steps/s",
         "goal": f">= {STEPS_GOAL:g} steps/s", "met": rate >= STEPS_GOAL,
         "spread": round(_percentile(latencies, 0.9) - _percentile(latencies, 0.1), 2)},
        _latency_figure("env step latency, small page", latencies, None),
        {"name": "env reset (new context + start page + observation)", "value": round(reset_ms, 1),
         "unit": "ms",
         "goal": "reference", "met": None, "spread": None},
    ]


def _find(axtree: str, text: str) -> int:
    for line in axtree.splitlines():
        if text in line:
            return int(line.strip()[1:].split("]", 1)[0])
    raise RuntimeError(f"{text!r} is not in the observation")


def bench_embedded(runs: int, chromium: str | None) -> list[dict[str, Any]]:
    """Reset time of the embedded sites and of the env on a bundled task, and pages served per second."""
    import concurrent.futures
    import urllib.request

    import gymnasium as gym

    import webarena_gym
    from webarena_gym.sites import EmbeddedSites

    figures = []
    with EmbeddedSites() as sites:
        urls = sites.start()
        figures.append(_latency_figure("embedded sites reset (pristine state)", _timed_ms(sites.reset, runs),
                                       1000.0))
        pages = [urls["shopping"] + "/", urls["shopping"] + "/catalogsearch/result/?q=shirt",
                 urls["reddit"] + "/", urls["reddit"] + "/forums", urls["shopping_admin"] + "/auth/login/"]

        def fetch(url: str) -> int:
            with urllib.request.urlopen(url, timeout=30) as response:
                return len(response.read())

        rates = []
        for _ in range(3):
            batch = pages * (4 if runs < 30 else 12)
            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                list(pool.map(fetch, batch))
            rates.append(len(batch) / (time.perf_counter() - start))
        figures.append({"name": "embedded sites pages served per second",
                        "value": round(statistics.median(rates), 1), "unit": "pages/s",
                        "goal": None, "met": None,
                        "spread": round(max(rates) - min(rates), 1)})
    browser = {"executable_path": chromium} if chromium else None
    env = gym.make(webarena_gym.ENV_ID, browser=browser)
    try:
        task_ids = [t.task_id for t in env.unwrapped.tasks[:5]]
        counter = iter(range(10**6))
        figures.append(_latency_figure(
            "env reset on a bundled task (sites + login + context + page + obs)",
            _timed_ms(lambda: env.reset(options={"task_id": task_ids[next(counter) % len(task_ids)]}),
                      max(3, runs // 5)), 1000.0))
    finally:
        env.close()
    return figures


@contextmanager
def _round_trips_before_the_cuts() -> Iterator[None]:
    """The session's per-step round trips as they were before they were cut: ``check_alive`` always probes
    the browser, every tab's history is read after every action, the observation reads each tab's title in
    a call of its own after the tree, and waiting for a page to load polls the driver (wait_for_timeout)."""
    from webarena_gym import browser, env

    def sequential(cdp: Any, calls: Any, pages: Any, *, timeout_ms: Any = None) -> Any:
        replies = [browser.cdp_send(cdp, method, params, timeout_ms=timeout_ms) for method, params in calls]
        return replies, browser.page_titles(pages)

    check_alive = browser.BrowserSession.check_alive
    saved = (check_alive, browser.BrowserSession._shows_allowed, env.cdp_send_with_titles, browser.pause)
    browser.BrowserSession.check_alive = lambda self, probe=True: check_alive(self)  # type: ignore[method-assign]
    browser.BrowserSession._shows_allowed = lambda self, page: False  # type: ignore[method-assign]
    env.cdp_send_with_titles = sequential  # type: ignore[assignment]
    browser.pause = lambda page, seconds: page.wait_for_timeout(seconds * 1000)  # type: ignore[assignment]
    try:
        yield
    finally:
        browser.BrowserSession.check_alive, browser.BrowserSession._shows_allowed = saved[:2]  # type: ignore
        env.cdp_send_with_titles, browser.pause = saved[2:]  # type: ignore[assignment]


class _StepTimer:
    """Times ``env.step`` of a wrapped env and counts its blocking calls into Playwright's driver (each sync
    API call waits for one reply; calls sent together wait once; the session's local pauses while a page
    loads are not calls, ``wait_for_timeout`` polls of before are), for as long as it is in use as a context
    manager. Instrumentation only: passes everything through."""

    def __init__(self, env: Any) -> None:
        self.env, self.unwrapped = env, env.unwrapped
        self.seconds: list[float] = []
        self.waits: list[int] = []
        self._count = 0

    def __enter__(self) -> _StepTimer:
        from playwright._impl._sync_base import SyncBase

        original = self._original = SyncBase._sync

        def counted(obj: Any, awaitable: Any) -> Any:
            self._count += getattr(awaitable, "__name__", "") != "_local_pause"  # a pause is not a call
            return original(obj, awaitable)

        SyncBase._sync = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from playwright._impl._sync_base import SyncBase

        SyncBase._sync = self._original  # type: ignore[method-assign]

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)

    def step(self, action: str) -> Any:
        start, count = time.perf_counter(), self._count
        try:
            return self.env.step(action)
        finally:
            self.seconds.append(time.perf_counter() - start)
            self.waits.append(self._count - count)


def bench_typing(n_tasks: int, reps: int, chromium: str | None) -> list[dict[str, Any]]:
    """Env steps/s of scripted reference solutions on the embedded sites: fill vs keys, and fill vs fill with
    the round trips of before the cuts (see the module docstring)."""
    import gymnasium as gym

    import webarena_gym
    from webarena_gym.reference import run_reference

    browser = {"executable_path": chromium} if chromium else None
    env = gym.make(webarena_gym.ENV_ID, split="train", browser=browser)
    variants: dict[str, tuple[str, bool]] = {"fill": ("fill", False), "keys": ("keys", False),
                                             "fill, round trips of before": ("fill", True)}
    rates: dict[str, list[float]] = {name: [] for name in variants}
    waits: dict[str, list[int]] = {name: [] for name in variants}
    try:
        timer = _StepTimer(env)
        typing = [t for t in env.unwrapped.tasks
                  if any(s.get("action") == "type" for s in t.extras.get("reference_solution") or ())]
        tasks = typing[:n_tasks]
        run_reference(env, tasks[0])  # warm-up: starts the sites and the browser
        for _ in range(reps):
            for name, (mode, before) in variants.items():
                env.unwrapped.typing_mode = mode
                with _round_trips_before_the_cuts() if before else contextlib.nullcontext(), timer:
                    for task in tasks:
                        timer.seconds, timer.waits = [], []
                        result = run_reference(timer, task)
                        if result.reward < 1.0:
                            raise RuntimeError(f"task {task.task_id} scored {result.reward} with {name}")
                        rates[name].append(len(timer.seconds) / sum(timer.seconds))
                        waits[name] += timer.waits
    finally:
        env.close()
    before = "fill, round trips of before"
    ratio = {name: [a / b for a, b in zip(rates["fill"], rates[name], strict=True)]
             for name in ("keys", before)}

    def figure(name: str, value: float, unit: str, goal: str | None, met: bool | None,
               values: list[float]) -> dict[str, Any]:
        return {"name": name, "value": round(value, 2), "unit": unit, "goal": goal, "met": met,
                "spread": round(_percentile(values, 0.9) - _percentile(values, 0.1), 2)}

    figures = [figure(f"env steps/s, reference solutions that type, embedded sites, typing {name}",
                      statistics.median(values), "steps/s", None, None, values)
               for name, values in rates.items()]
    for name, counts in waits.items():  # load-robust: the same counts on a busy machine
        figure_ = figure(f"blocking driver calls per env step (mean), typing {name}",
                         statistics.fmean(counts), "calls", None, None, [float(c) for c in counts])
        figure_["note"] = ("sequential waits on Playwright's driver per step; a typed chunk of 8 keys is one "
                           "call here but 8 key presses in the driver")
        figures.append(figure_)
    keys_x, before_x = statistics.median(ratio["keys"]), statistics.median(ratio[before])
    figures.append(figure("env steps/s ratio, typing fill / keys (same tasks, interleaved)", keys_x, "x",
                          "> 1", keys_x > 1, ratio["keys"]))
    figures.append(figure("env steps/s ratio, round trips cut / as before (fill, same tasks, interleaved)",
                          before_x, "x", "> 1", before_x > 1, ratio[before]))
    for f in figures:
        f["tasks"], f["reps"] = [t.task_id for t in tasks], reps
    return figures


def main(quick: bool = False, chromium: str | None = None) -> list[dict[str, Any]]:
    """Run the benchmark and return the figures (also printed)."""
    runs, steps = (15, 28) if quick else (60, 140)
    with _local_site() as base:
        figures = bench_observation(base, runs, chromium, compare_webarena=True)
        figures += bench_steps(base, steps, chromium)
    figures += bench_typing(3 if quick else 8, 1 if quick else 3, chromium)
    figures += bench_embedded(runs, chromium)
    print(f"bench_env (quick={quick})")
    for f in figures:
        extra = "" if f["spread"] is None else f" (spread p90-p10 {f['spread']})"
        print(f"  {f['name']}: {f['value']} {f['unit']}{extra}  goal {f['goal']}  met={f['met']}")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and steps")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--chromium", default=None, help="Chromium executable (default: found automatically)")
    args = parser.parse_args()
    result = main(args.quick, args.chromium)
    if args.json:
        print(json.dumps(result, indent=1))
