"""The update log of :class:`~es_agent.problem.AgentProblem`: the records that move every replica's centre.

The centre is a base (the spec's model, or a snapshot after :meth:`UpdateLog.rebase`) plus the records after
it, replayed in order. Records are :class:`~es_agent.updates.UpdateRecord`\\ s: weight updates (``(seed,
coeff)`` pairs, :class:`~es_agent.updates.WeightUpdate`) and prompt-pool replacements. Positions are absolute:
``offset`` records are folded into the base, ``end`` is the centre's version.

Sync. The driver sends each worker the records it lacks (:meth:`UpdateLog.sync_data`, ``{"start",
"records"}``); the worker's copy of the problem appends them (:meth:`UpdateLog.extend`) and its replica
replays them. After an evaluation each worker reports its log position and weight checksum;
:func:`check_agreement` compares the reports with the log's end and raises
:class:`~es_agent.errors.ReplicaDivergenceError` when live replicas disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from es_agent.errors import ReplicaDivergenceError, SpecError
from es_agent.updates import UpdateRecord, WeightUpdate

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.prompts import PromptPools


class UpdateLog:
    """The run's update records after a base, the base's prompt pools and the current ones (module
    docstring). Small and plain: it travels inside the pickled problem to every worker."""

    def __init__(self, pools: PromptPools) -> None:
        self.base_pools = pools
        """The prompt pools of the base (before the first record kept)."""
        self.pools = pools
        """The current prompt pools (after the last ``pools`` record)."""
        self.offset = 0
        """Records folded into the base (the position of the first record kept)."""
        self._records: list[UpdateRecord] = []

    @property
    def end(self) -> int:
        """Number of records since the start of the run (the centre's version)."""
        return self.offset + len(self._records)

    @property
    def records(self) -> tuple[UpdateRecord, ...]:
        """The records after the base, oldest first (the first one has index :attr:`offset`)."""
        return tuple(self._records)

    @property
    def last_generation(self) -> int:
        """Generation of the newest record kept (0 when none is kept)."""
        return self._records[-1].generation if self._records else 0

    def push_weights(self, generation: int, update: WeightUpdate) -> UpdateRecord | None:
        """Append a weight update; an empty one is not logged (returns ``None``)."""
        if not isinstance(update, WeightUpdate):
            raise SpecError(f"push_update takes a WeightUpdate, got {type(update).__name__}")
        if update.is_empty:
            return None
        record = UpdateRecord(self.end, int(generation), weights=update)
        self._records.append(record)
        return record

    def push_pools(self, pools: PromptPools, generation: int | None = None) -> UpdateRecord:
        """Append a replacement of the prompt pools (same slots; variants may change). ``generation``
        defaults to that of the newest record."""
        if pools.slot_names != self.pools.slot_names:
            raise SpecError(f"new pools have slots {list(pools.slot_names)}, the problem's rows have "
                            f"{list(self.pools.slot_names)}: slots cannot change during a run")
        gen = generation if generation is not None else self.last_generation
        record = UpdateRecord(self.end, int(gen), pools=pools.to_dict())
        self._records.append(record)
        self.pools = pools
        return record

    def sync_data(self, since: int) -> dict[str, Any] | None:
        """The records from position ``since`` on (at least :attr:`offset`) as ``{"start": int, "records":
        [...]}``; ``None`` when there is nothing new."""
        since = max(since, self.offset)
        if since >= self.end:
            return None
        return {"start": since, "records": self._records[since - self.offset:]}

    def extend(self, start: int, records: Sequence[UpdateRecord]) -> None:
        """Worker side: append the ``records`` (the first has position ``start``) this copy lacks."""
        from es_agent.prompts import PromptPools

        if start > self.end:
            raise ReplicaDivergenceError(f"worker log ends at {self.end}, received records from {start}")
        for record in records[self.end - start:]:
            if record.index != self.end:
                raise ReplicaDivergenceError(
                    f"update log out of order: expected record {self.end}, got {record.index}")
            self._records.append(record)
            if record.kind == "pools":
                self.pools = PromptPools.from_dict(dict(record.pools or {}), source=f"update {record.index}")

    def rebase(self) -> None:
        """Fold every record into the base (the caller saved the centre as the new base's snapshot)."""
        self.base_pools = self.pools
        self.offset, self._records = self.end, []


def check_agreement(reports: Sequence[Mapping[str, Any] | None], log_end: int,
                    expected_checksum: str | None = None) -> bool | None:
    """Whether the live replicas of ``reports`` (one per worker; ``None`` or a ``checksum`` of ``None``: not
    live) all stand at ``log_end`` with one checksum (``expected_checksum`` when given). ``None`` when no
    replica is live; raises :class:`ReplicaDivergenceError` naming each worker's update and checksum when
    they disagree."""
    live = [(i, r) for i, r in enumerate(reports) if r is not None and r["checksum"] is not None]
    if not live:
        return None
    sums = {r["checksum"] for _, r in live}
    lagging = [i for i, r in live if r["applied"] != log_end]
    wrong = expected_checksum is not None and bool(sums - {expected_checksum})
    if len(sums) == 1 and not lagging and not wrong:
        return True
    detail = ", ".join(f"worker {i}: update {r['applied']}, checksum {r['checksum'][:12]}" for i, r in live)
    expected = f"; expected {expected_checksum[:12]}" if expected_checksum else ""
    raise ReplicaDivergenceError(f"model replicas disagree after update {log_end} ({detail}{expected}); "
                                 "restart the diverged worker(s) with restart_worker(i)")
