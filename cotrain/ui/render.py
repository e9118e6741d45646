"""Pure render function: ``DashboardState`` in, rich renderable out (no clock, no I/O, no mutation)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cotrain.ui.charts import column_chart, hbar, progress_bar, sparkline, value_range
from cotrain.ui.state import DashboardState, WorkerHealth

WIDE = 100  # from this width on, two columns
TOP_TASKS = 3  # tasks shown at each end of the per-task table
MAX_WORKER_ROWS = 12
PROMPT_LINES = 2  # lines of best-prompt text per slot


def render_dashboard(state: DashboardState, width: int | None = None) -> RenderableType:
    """The dashboard for ``state`` laid out for ``width`` columns (the console's width when ``None``)."""
    if width is None:
        return _AutoWidth(copy.deepcopy(state))
    width = max(40, int(width))
    wide = width >= WIDE
    lcol = (width - 1) // 2 if wide else width
    rcol = width - 1 - lcol if wide else width
    left = [_progress(state, lcol), _rewards(state, lcol), _timing(state, lcol)]
    right = [_prompts(state, rcol), _tasks(state, rcol), _workers(state, rcol)]
    if wide:
        grid = Table.grid(padding=(0, 1, 0, 0))
        grid.add_column(width=lcol)
        grid.add_column(width=rcol)
        grid.add_row(Group(*left), Group(*right))
        body: RenderableType = grid
    else:
        body = Group(*left, *right)
    return Group(_header(state, wide), body, _best_prompt(state, width))


class _AutoWidth:
    """Defers layout to render time so the dashboard fits whatever console draws it."""

    def __init__(self, state: DashboardState) -> None:
        self.state = state

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield render_dashboard(self.state, width=options.max_width)


# -- formatting --------------------------------------------------------------------------------------


def _hms(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "–" if value is None else format(value, fmt)


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def _section(title: str, body: RenderableType, width: int) -> Panel:
    return Panel(
        body,
        title=f"[bold]{title}[/]",
        title_align="left",
        box=box.ROUNDED,
        width=width,
        border_style="blue",
        padding=(0, 1),
    )


def _waiting(text: str = "waiting for the first generation…") -> Text:
    return Text(text, style="dim italic")


def _inner(width: int) -> int:
    return max(10, width - 4)


def _fill(inner: int, fixed: Sequence[int], cap: int = 32) -> int:
    """Width left for one flexible column beside ``fixed`` ones (three cells between columns)."""
    return max(4, min(cap, inner - sum(fixed) - 3 * len(fixed)))


# -- sections ----------------------------------------------------------------------------------------


def _header(state: DashboardState, wide: bool) -> Panel:
    total = "?" if state.total_generations is None else str(state.total_generations)
    parts = (
        Text.assemble(("esopt", "bold magenta"), " · ", (state.run_name, "bold")),
        Text.assemble("generation ", (f"{state.generation}/{total}", "bold")),
        Text.assemble("elapsed ", (_hms(state.elapsed), "bold"), "   ETA ", (_hms(state.eta), "bold")),
    )
    if not wide:
        name = state.run_name if len(state.run_name) <= 24 else state.run_name[:23] + "…"
        line = Text.assemble(
            (name, "bold"),
            "  gen ",
            (f"{state.generation}/{total}", "bold"),
            "  ",
            parts[2],
            no_wrap=True,
            overflow="ellipsis",
        )
        return Panel(line, box=box.ROUNDED, border_style="magenta", padding=(0, 1))
    grid = Table.grid(expand=True)
    for justify in ("left", "center", "right"):
        grid.add_column(justify=justify, ratio=1, no_wrap=True)
    grid.add_row(*parts)
    return Panel(grid, box=box.ROUNDED, border_style="magenta", padding=(0, 1))


def _progress(state: DashboardState, width: int) -> Panel:
    inner = _inner(width)
    total, done = state.rollouts_total, state.rollouts_done
    pct = f"{100 * done / total:3.0f}%" if total else "  –"
    label = Text.assemble(f"gen {state.generation}  ", (f"{done}/{total}", "bold"), " rollouts ", pct)
    done_bar, rest_bar = progress_bar(done / total if total else 0.0, inner)
    bar = Text.assemble((done_bar, "bold green" if total and done >= total else "green"), (rest_bar, "dim"))
    flights = _in_flight_line(state.workers, inner)
    sigma = state.history[-1].sigma if state.history else None
    facts = Text(f"population {state.population_size or '–'}   sigma {_num(sigma, '.5f')}", style="dim")
    return _section("Generation progress", Group(label, bar, flights, facts), width)


def _in_flight_line(workers: dict, inner: int) -> Text:
    line = Text("in flight ")
    line.append(str(sum(w.in_flight for w in workers.values())), style="bold")
    for wid, worker in sorted(workers.items(), key=lambda kv: str(kv[0])):
        piece = f"  w{wid} " + ("●" * min(worker.in_flight, 4) or "○") + ("+" if worker.in_flight > 4 else "")
        if len(line) + len(piece) > inner - 2:
            line.append("  …", style="dim")
            break
        line.append(piece, style="cyan" if worker.alive else "red")
    return line


def _rewards(state: DashboardState, width: int) -> Panel:
    if not state.history:
        return _section("Reward per generation", _waiting(), width)
    label_w, axis_w, value_w = 8, 5, 11
    chart_w = max(5, _inner(width) - label_w - axis_w - value_w - 3)
    hist = state.history[-chart_w:]
    stretch = max(1, min(3, chart_w // len(hist)))
    last = state.history[-1]
    means = [r.reward_mean for r in hist]
    maxes = [r.reward_max for r in hist]
    lo, hi = value_range(means + maxes)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=label_w, no_wrap=True)
    grid.add_column(width=axis_w, justify="right", no_wrap=True, style="dim")
    grid.add_column(width=chart_w, no_wrap=True)
    grid.add_column(width=value_w, no_wrap=True)
    rows = column_chart(_stretch(means, stretch), lo, hi, height=4)
    for i, row in enumerate(rows):
        axis = f"{hi:.2f}" if i == 0 else f"{lo:.2f}" if i == len(rows) - 1 else ""
        grid.add_row(
            "mean" if i == 0 else "",
            axis,
            Text(row, style="green"),
            Text(_num(last.reward_mean), style="bold green") if i == len(rows) - 1 else "",
        )
    lines: list[tuple[str, Sequence[float | None], tuple[float, float], str, str]] = [
        ("max", maxes, (lo, hi), _num(last.reward_max), "cyan"),
        ("success", [r.success_rate for r in hist], (0.0, 1.0), _num(last.success_rate, ".2f"), "magenta"),
    ]
    if any(r.centre_success is not None for r in hist):
        split = next((r.centre_split for r in reversed(hist) if r.centre_split), None) or "eval"
        latest = next((r.centre_success for r in reversed(hist) if r.centre_success is not None), None)
        lines.append(
            (
                "centre",
                [r.centre_success for r in hist],
                (0.0, 1.0),
                f"{_num(latest, '.2f')} {split}",
                "yellow",
            )
        )
    sigmas = [r.sigma for r in hist]
    lines.append(("sigma", sigmas, value_range(sigmas, unit=False), _num(last.sigma, ".5f"), "blue"))
    for name, values, (vlo, vhi), shown, style in lines:
        grid.add_row(
            name,
            "",
            Text(sparkline(_stretch(values, stretch), vlo, vhi), style=style),
            Text(shown, style=f"bold {style}"),
        )
    span = f"gens {hist[0].gen}–{hist[-1].gen}" if len(hist) > 1 else f"gen {hist[0].gen}"
    grid.add_row("", "", Text(span, style="dim"), "")
    notes: list[RenderableType] = []
    if state.update_note is not None:
        tied = last.update_kind in ("tie-break only", "empty")
        notes.append(Text(state.update_note, style="yellow" if tied else "dim"))
    if state.held_out is not None:
        notes.append(Text(state.held_out, style="bold yellow"))
    if not notes:
        return _section("Reward per generation", grid, width)
    return _section("Reward per generation", Group(grid, *notes), width)


def _stretch(values: Sequence[float | None], times: int) -> list[float | None]:
    return [v for v in values for _ in range(times)]


def _timing(state: DashboardState, width: int) -> Panel:
    if not state.history:
        return _section("Time split", _waiting(), width)
    latest, total = state.seconds_split(), state.seconds_split(cumulative=True)
    lsum, tsum = sum(latest.values()) or 1.0, sum(total.values()) or 1.0
    bar_w = _fill(_inner(width), [7, 7, 4, 7, 4])
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), expand=False, show_edge=False, pad_edge=False)
    for name, justify in (
        ("phase", "left"),
        ("latest", "right"),
        ("%", "right"),
        ("total", "right"),
        ("%", "right"),
        ("share (latest)", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for phase, style in (("rollout", "green"), ("perturb", "yellow"), ("update", "cyan")):
        table.add_row(
            phase,
            f"{latest[phase]:.1f}s",
            f"{100 * latest[phase] / lsum:.0f}%",
            f"{total[phase]:.1f}s",
            f"{100 * total[phase] / tsum:.0f}%",
            Text(hbar(latest[phase] / lsum, bar_w), style=style),
        )
    sent = [r.bytes_exchanged for r in state.history if r.bytes_exchanged is not None]
    note = (
        Text(f"exchanged {_bytes(sent[-1])}/gen (latest) · {_bytes(sum(sent))} total", style="dim")
        if sent
        else Text("exchanged –", style="dim")
    )
    return _section("Time split", Group(table, note), width)


def _prompts(state: DashboardState, width: int) -> Panel:
    if not state.prompt_probs:
        return _section("Prompt probabilities", _waiting(), width)
    inner = _inner(width)
    pool_w = min(12, max(4, max(len(p) for p in state.prompt_probs.values())))
    slot_w = min(14, max(4, *(len(s) for s in state.prompt_probs)))
    bar_w = _fill(inner, [slot_w, 4, 4, pool_w + 3], cap=24)
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False, pad_edge=False)
    table.add_column("slot", no_wrap=True, max_width=slot_w, overflow="ellipsis")
    table.add_column("best", justify="right", no_wrap=True)
    table.add_column("p(best)", no_wrap=True)
    table.add_column("", justify="right", no_wrap=True)
    table.add_column("pool", no_wrap=True)
    for slot, probs in state.prompt_probs.items():
        if not probs:
            table.add_row(slot, "–", "", "", "")
            continue
        best = max(range(len(probs)), key=probs.__getitem__)
        table.add_row(
            slot,
            f"#{best}",
            Text(hbar(probs[best], bar_w), style="green"),
            f"{probs[best]:.2f}",
            Text(sparkline(probs[:pool_w], 0.0, max(probs)) + f" {len(probs):>2}", style="cyan"),
        )
    return _section("Prompt probabilities", table, width)


def _tasks(state: DashboardState, width: int) -> Panel:
    tasks = state.per_task_success
    if not tasks:
        return _section("Per-task success (latest)", _waiting(), width)
    ranked = sorted(tasks.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ranked if len(ranked) <= 2 * TOP_TASKS else ranked[:TOP_TASKS] + ranked[-TOP_TASKS:]
    task_w = min(16, max(4, *(len(t) for t, _ in shown)))
    bar_w = _fill(_inner(width), [task_w, 4])
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False, pad_edge=False)
    table.add_column("task", no_wrap=True, max_width=task_w, overflow="ellipsis")
    table.add_column("success", no_wrap=True)
    table.add_column("", justify="right", no_wrap=True)
    for i, (task, rate) in enumerate(shown):
        if len(shown) < len(ranked) and i == TOP_TASKS:
            table.add_row(Text(f"… {len(ranked) - len(shown)} more", style="dim"), "", "")
        style = "green" if rate >= 0.5 else "yellow" if rate > 0 else "red"
        table.add_row(task, Text(hbar(rate, bar_w), style=style), f"{rate:.2f}")
    solved = sum(1 for r in tasks.values() if r > 0)
    mean = sum(tasks.values()) / len(tasks)
    note = Text(f"{len(tasks)} tasks · mean {mean:.2f} · solved by any {solved}/{len(tasks)}", style="dim")
    return _section("Per-task success (latest)", Group(table, note), width)


def _workers(state: DashboardState, width: int) -> Panel:
    if not state.workers:
        return _section("Workers", _waiting("no workers reported yet"), width)
    items = sorted(
        state.workers.items(), key=lambda kv: (kv[1].alive, kv[1].checksum_ok is not False, str(kv[0]))
    )
    items = sorted(items[:MAX_WORKER_ROWS], key=lambda kv: str(kv[0]))
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False, pad_edge=False)
    for name, justify in (
        ("id", "left"),
        ("state", "left"),
        ("in flight", "left"),
        ("done", "right"),
        ("restarts", "right"),
        ("checksum", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for wid, worker in items:
        table.add_row(
            f"w{wid}",
            _alive(worker),
            Text("●" * min(worker.in_flight, 6) or "·", style="cyan"),
            str(worker.done),
            Text(str(worker.restarts), style="yellow" if worker.restarts else ""),
            _checksum(worker),
        )
    alive = sum(w.alive for w in state.workers.values())
    agree = {True: ("agree", "green"), False: ("DISAGREE", "bold red"), None: ("unknown", "dim")}
    word, style = agree[state.checksums_agree]
    note = Text.assemble(f"{alive}/{len(state.workers)} alive · checksums ", (word, style))
    if len(state.workers) > len(items):
        note.append(f" · {len(state.workers) - len(items)} more not shown", style="dim")
    return _section("Workers", Group(table, note), width)


def _alive(worker: WorkerHealth) -> Text:
    return Text("● alive", style="green") if worker.alive else Text("✖ dead", style="bold red")


def _checksum(worker: WorkerHealth) -> Text:
    digest = (worker.checksum or "")[:6]
    if worker.checksum_ok is None:
        return Text(f"? {digest}".rstrip(), style="dim")
    if worker.checksum_ok:
        return Text(f"✓ {digest}".rstrip(), style="green")
    return Text(f"✗ {digest}".rstrip(), style="bold red")


def _best_prompt(state: DashboardState, width: int) -> Panel:
    if not state.best_prompt:
        return _section("Best prompt", _waiting(), width)
    label_w = min(14, max(len(s) for s in state.best_prompt) + 1)
    line_w = _inner(width) - label_w - 1
    budget = max(10, line_w * PROMPT_LINES - line_w // 6)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=label_w, no_wrap=True, style="bold")
    grid.add_column(ratio=1)
    for slot, text in state.best_prompt.items():
        flat = " ".join(text.split())
        shown = flat if len(flat) <= budget else flat[: budget - 1].rstrip() + "…"
        grid.add_row(slot, Text(shown, overflow="fold"))
    return _section("Best prompt", grid, width)
