"""``python -m webarena_gym.taskgen.summary``: Markdown tables describing the bundled task set.

Tasks per split, per site, per eval type and per template, and the length of the reference solutions (steps,
the final ``stop`` included), read from the committed task files.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from webarena_gym.taskgen.build import SPLITS, all_templates


def eval_kind(entry: dict[str, Any]) -> str:
    """The eval kind of a task entry: its eval types joined by ``+``, or ``string_match (N/A)``."""
    answers = entry["eval"].get("reference_answers") or {}
    if answers.get("fuzzy_match") == "N/A":
        return "string_match (N/A)"
    return "+".join(entry["eval"]["eval_types"])


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _lengths(entries: Sequence[dict[str, Any]]) -> str:
    steps = [len(e["reference_solution"]) for e in entries]
    if not steps:
        return "-"
    return f"{min(steps)} / {statistics.median(steps):g} / {max(steps)}"


def _by(entries: Sequence[dict[str, Any]], key: Any, title: str) -> str:
    counts = {split: Counter(key(e) for e in entries if e["split"] == split) for split in SPLITS}
    values = sorted({key(e) for e in entries})
    rows = [
        [
            value,
            *(counts[s][value] for s in SPLITS),
            sum(counts[s][value] for s in SPLITS),
            _lengths([e for e in entries if key(e) == value]),
        ]
        for value in values
    ]
    rows.append(["**total**", *(sum(counts[s].values()) for s in SPLITS), len(entries), _lengths(entries)])
    return _table([title, *SPLITS, "all", "steps min / median / max"], rows)


def summarize(entries: Sequence[dict[str, Any]]) -> str:
    """The Markdown summary of task entries (WebArena format with ``split`` and ``reference_solution``)."""
    slugs = {t.template_id: t.slug for t in all_templates()}
    per_template = []
    for template_id in sorted({e["intent_template_id"] for e in entries}):
        group = [e for e in entries if e["intent_template_id"] == template_id]
        first = group[0]
        splits = "+".join(s for s in SPLITS if any(e["split"] == s for e in group))
        per_template.append(
            [
                template_id,
                slugs.get(template_id, "?"),
                ", ".join(first["sites"]),
                eval_kind(first),
                splits,
                len(group),
                _lengths(group),
            ]
        )
    templates = len(per_template)
    parts = [
        f"**{len(entries)} tasks from {templates} templates.**",
        "Tasks per split",
        _table(
            ["split", "templates", "tasks", "steps min / median / max"],
            [
                [
                    s,
                    len({e["intent_template_id"] for e in entries if e["split"] == s}),
                    sum(e["split"] == s for e in entries),
                    _lengths([e for e in entries if e["split"] == s]),
                ]
                for s in SPLITS
            ],
        ),
        "Tasks per site",
        _by(entries, lambda e: " + ".join(e["sites"]), "sites"),
        "Tasks per eval type",
        _by(entries, eval_kind, "eval type"),
        "Tasks per template",
        _table(
            ["id", "template", "sites", "eval type", "split", "tasks", "steps min / median / max"],
            per_template,
        ),
    ]
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the summary of the bundled task set."""
    from webarena_gym.embedded import load_entries

    parser = argparse.ArgumentParser(prog="python -m webarena_gym.taskgen.summary", description=__doc__)
    parser.parse_args(argv)
    print(summarize(load_entries(None)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
