"""Generator of the bundled embedded task set: WebArena intent templates instantiated over the seeded sites.

>>> from webarena_gym.taskgen import generate
>>> tasks = generate()          # {"train": [...], "test": [...], "test_unseen": [...]}, WebArena-format dicts

Reference answers are computed from :class:`~webarena_gym.sites.data.SiteData` (the queries the sites render
their pages with), never typed in; each entry also carries its ``split`` and a scripted ``reference_solution``
(steps naming elements by role and accessible name, replayed by :mod:`webarena_gym.reference`). Regenerate the
committed files with ``python -m webarena_gym.taskgen --out webarena_gym/data/tasks``; the output is
byte-identical for the same seed. Template modules: :mod:`.shop`, :mod:`.admin`, :mod:`.forum`,
:mod:`.cross` (cross-site and unachievable tasks).
"""

from __future__ import annotations

from webarena_gym.taskgen.build import (
    DEFAULT_TASK_SEED,
    SPLITS,
    all_templates,
    generate,
    render,
    write_task_files,
)

__all__ = ["DEFAULT_TASK_SEED", "SPLITS", "all_templates", "generate", "render", "write_task_files"]
