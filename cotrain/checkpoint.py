"""The run directory: configuration, logs, prompt state and weight snapshots; no pickle anywhere.

Layout::

    run.json                    manifest: format, generations done, snapshots, final checksum, the task ids
                                resolved at the start (``tasks``: train, eval), the ``"auto"`` settings
                                chosen at the start (``resolved``: dtype, num_workers and their reasons)
                                (written last)
    config.json                 the TrainConfig (JSON)
    initial_prompt_pools.json   the pools at generation 0 (replay starts here)
    update_log.jsonl            one line per generation: task batch, env seed, rows (noise seeds, signed
                                sigma, prompt ids), rewards, sigma, weight update (seeds, coeffs), prompt
                                probs, pool changes, distribution state after the generation
    metrics.jsonl               the searcher's status dicts (JSON-safe)
    prompt_pools.json           the current pools            (convenience copies of the state at
    distribution.json           the current distribution      ``run.json``'s generation)
    snapshots/gen_000010/       centre weights after 10 generations, Hugging Face layout: model.safetensors,
                                config.json, tokenizer files, snapshot.json
    learning_curve.png, eval_<split>.json, ...

Every file is written whole to a temporary name, fsynced and renamed, and ``run.json`` is written last: a
SIGKILL at any moment leaves the previous consistent state. The state after generation ``G`` is rebuilt as:
the last snapshot at or before ``G`` plus the weight updates logged after it; the pools at generation 0 plus
the logged pool changes; the distribution logged with generation ``G`` (:meth:`RunDir.load_state`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotrain.config import ResolvedSettings, TrainConfig, saved_config_from_dict, with_resolved
from cotrain.distribution import CoEvolutionDistribution
from cotrain.errors import CheckpointError, ConfigError, RunDirError, RunIntegrityError
from cotrain.integrity import (
    DIGEST,
    GENESIS,
    LOCK_FILE,
    RunLock,
    record_digest,
    sha256_file,
    verify_chain,
    verify_file_digest,
    verify_snapshot,
)
from cotrain.prompt_evolution import apply_pool_changes
from es_agent.updates import WeightUpdate

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.prompts import PromptPools

RUN_FORMAT = "esopt-run/2"
"""Tag of ``run.json`` (2: the update log is a hash chain, snapshots and inputs carry SHA-256 digests)."""
LEGACY_RUN_FORMAT = "esopt-run/1"
"""Tag of runs written before the digests: still opened, resumed, evaluated and exported, without the checks
that need digests (their log must then carry no chain field at all)."""
SNAPSHOT_FORMAT = "esopt-snapshot/1"
"""Tag of ``snapshots/*/snapshot.json``."""
WEIGHTS_FILE = "model.safetensors"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".msgpack", ".h5")
_INPUTS = ("config.json", "initial_prompt_pools.json")
"""Files written once at creation whose digests ``run.json`` keeps (``files``)."""
_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- atomic IO


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a fsynced temporary file and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes files private; run files are as readable as any other
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_json(path: str | Path, data: Any) -> None:
    """``atomic_write_text`` of indented JSON (NaN refused)."""
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some filesystems refuse to open directories; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_json(path: Path, error: type[Exception] = RunDirError) -> Any:
    """Parse a JSON file; a missing or corrupt file raises ``error`` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"missing file {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"corrupt file {path}: {exc}") from None


def read_jsonl(path: Path, error: type[Exception] = RunDirError) -> list[dict[str, Any]]:
    """Parse a JSON-lines file (missing: no lines); a corrupt line raises ``error`` naming file and line."""
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"corrupt file {path}, line {number}: {exc}") from None
        if not isinstance(item, dict):
            raise error(f"corrupt file {path}, line {number}: expected a JSON object")
        out.append(item)
    return out


def json_safe(value: Any) -> Any:
    """A JSON-safe copy: tensors and numpy values as numbers or lists, NaN/inf as ``None``; values that have
    no JSON form (EvoTorch ``Solution`` objects...) are dropped from dicts and lists."""
    import math

    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            converted = json_safe(v)
            if converted is not _DROP:
                out[str(k)] = converted
        return out
    if isinstance(value, list | tuple):
        return [c for c in (json_safe(v) for v in value) if c is not _DROP]
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__.split(".")[0] in ("torch", "numpy"):
        return json_safe(tolist())
    return _DROP


_DROP = object()


# --------------------------------------------------------------------------------------------- state


@dataclass
class RunState:
    """A run's state after ``generation`` completed generations, rebuilt from its directory."""

    generation: int
    """Completed generations."""
    distribution: CoEvolutionDistribution
    """The search distribution (at ``generation``)."""
    pools: PromptPools
    """The prompt pools."""
    snapshot: Path | None
    """``model.safetensors`` of the latest snapshot at or before ``generation`` (``None``: the base model)."""
    snapshot_generation: int
    """Generation of that snapshot (0 for the base model)."""
    pending: list[tuple[int, WeightUpdate]]
    """Weight updates logged after the snapshot, as ``(generation, update)``, in order."""
    checksum: str | None
    """The centre's weight checksum at ``generation`` when the directory records it."""


def initial_distribution(config: TrainConfig, pools: PromptPools) -> CoEvolutionDistribution:
    """The generation-0 distribution of a run: categoricals over the pools with ``es.baseline_prior`` of
    their mass on the baseline genome ``eval.baseline`` (uniform when ``es.baseline_prior = 0``)."""
    # issue #13 item 4 (engineer C): the prompt prior; a ConfigError when the pools lack the baseline
    baseline_ids = None
    if config.es.distribution.baseline_prior > 0:
        from es_agent.errors import PromptPoolError

        try:
            baseline_ids = pools.baseline(config.eval.baseline).indices
        except PromptPoolError as exc:
            raise ConfigError(f"es.baseline_prior: puts mass on the baseline genome eval.baseline = "
                              f"{config.eval.baseline!r}, but {exc}; set es.baseline_prior = 0 for a "
                              "uniform start") from None
    return CoEvolutionDistribution.create(list(pools.sizes().values()), base_seed=config.es.seed,
                                          config=config.es.distribution, baseline_ids=baseline_ids)


def load_pools(path: str | None) -> PromptPools:
    """The pools of ``prompts.pools`` (``None``: the package default); a bad file is a ConfigError."""
    from es_agent.errors import PromptPoolError
    from es_agent.prompts import PromptPools

    try:
        return PromptPools.load(path)
    except PromptPoolError as exc:
        raise ConfigError(f"prompts.pools: {exc}") from None


class RunDir:
    """One run's directory (see the module docstring). Make one with :meth:`create` or :meth:`open`."""

    def __init__(self, path: str | Path, manifest: dict[str, Any], config: TrainConfig) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self.config = config
        self._records: list[dict[str, Any]] | None = None
        self._metrics: list[dict[str, Any]] | None = None
        self._lock = RunLock(self.path)
        self._created = False
        self._torn: int | None = None

    # ---------------------------------------------------------------------------------------- open/create

    @classmethod
    def create(cls, path: str | Path, config: TrainConfig, pools: PromptPools) -> RunDir:
        """A new run directory for ``config`` (the directory must be absent or empty)."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise RunDirError(f"{path} exists and is not a directory")
        created = not path.exists()
        path.mkdir(parents=True, exist_ok=True)
        lock = RunLock(path)
        lock.acquire()  # before the checks: two `esopt train` on one directory cannot both pass them
        try:
            if (path / "run.json").exists():
                raise RunDirError(f"{path} already holds a run ({path / 'run.json'}): continue it with "
                                  f"`esopt resume --run-dir {path}` or choose another directory")
            if any(p.name != LOCK_FILE for p in path.iterdir()):
                raise RunDirError(f"{path} exists, is not empty and is not an esopt run directory "
                                  "(no run.json)")
            atomic_write_json(path / "config.json", config.to_dict())
            atomic_write_json(path / "initial_prompt_pools.json", pools.to_dict())
            now = _now()
            manifest = {"format": RUN_FORMAT, "generation": 0, "total_generations": config.es.generations,
                        "finished": False, "log_end": 0, "log_head": GENESIS, "snapshots": [],
                        "checksum": None, "files": {name: sha256_file(path / name) for name in _INPUTS},
                        "created": now, "updated": now}
            atomic_write_json(path / "run.json", manifest)
        except BaseException:
            lock.release()
            raise
        run = cls(path, manifest, config)
        run._records, run._metrics = [], []
        run._lock, run._created = lock, created
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run directory; a missing, foreign or corrupt one raises RunDirError naming the file."""
        path = Path(path)
        if not path.is_dir():
            raise RunDirError(f"no run directory at {path}")
        manifest_path = path / "run.json"
        if not manifest_path.exists():
            raise RunDirError(f"{path} is not an esopt run directory: {manifest_path} is missing")
        manifest = read_json(manifest_path)
        if not isinstance(manifest, dict) or manifest.get("format") not in (RUN_FORMAT, LEGACY_RUN_FORMAT):
            found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
            raise RunDirError(f"{manifest_path} is not an esopt run manifest (format {found!r}, "
                              f"expected {RUN_FORMAT!r})")
        _check_manifest(manifest, manifest_path)
        try:
            config = saved_config_from_dict(read_json(path / "config.json"))
        except ConfigError as exc:
            raise RunDirError(f"corrupt file {path / 'config.json'}: {exc}") from None
        if manifest["format"] == RUN_FORMAT:  # a valid config that is not the one the run started with
            verify_file_digest(path / "config.json", manifest["files"]["config.json"], manifest_path,
                               "the run's configuration")
        if "resolved" in manifest:  # the dtype and worker count chosen at the start, not a new detection
            config = with_resolved(config, _resolved(manifest, manifest_path))
        return cls(path, manifest, config)

    # ---------------------------------------------------------------------------------------- reading

    @property
    def generation(self) -> int:
        """Completed generations."""
        return int(self.manifest["generation"])

    @property
    def chained(self) -> bool:
        """Whether the run carries digests (format 2): a hash-chained log and verified snapshots."""
        return self.manifest["format"] == RUN_FORMAT

    @property
    def finished(self) -> bool:
        """Whether the run reached its last generation and wrote its final snapshot."""
        return bool(self.manifest.get("finished"))

    def records(self) -> list[dict[str, Any]]:
        """Update-log entries of the completed generations (entries past ``run.json``'s count are ignored)."""
        if self._records is None:
            file = self.path / "update_log.jsonl"
            lines, self._torn = _read_log(file)
            kept = [(n, r) for n, r in lines[:self.generation]]
            if [r.get("iter") for _, r in kept] != list(range(1, self.generation + 1)):
                if self._torn is not None and len(kept) < self.generation:
                    raise CheckpointError(
                        f"{file}, line {self._torn}: truncated (a write torn by a crash or a full disk), but "
                        f"{self.path / 'run.json'} records {self.generation} generation(s) and the log holds "
                        f"{len(kept)} complete line(s): generation {len(kept) + 1} cannot be rebuilt")
                raise CheckpointError(f"{file} does not hold generations 1..{self.generation} in order "
                                      f"(found {[r.get('iter') for _, r in lines][:20]})")
            if self.chained:
                verify_chain(file, kept, self.manifest["log_head"])
            else:
                chained = [n for n, r in kept if "prev" in r]
                if chained:
                    raise RunIntegrityError(f"{file}, line {chained[0]}: a chain digest ('prev') in the log "
                                            f"of a {LEGACY_RUN_FORMAT} run, whose log carries none")
            self._records = [r for _, r in kept]
        return self._records

    def metrics(self) -> list[dict[str, Any]]:
        """Status dicts of the completed generations."""
        if self._metrics is None:
            rows, _ = _read_log(self.path / "metrics.jsonl")  # a torn last line (a crash) is dropped
            last = self.generation
            self._metrics = [m for _, m in rows if isinstance(m.get("iter"), int) and m["iter"] <= last]
        return self._metrics

    def initial_pools(self) -> PromptPools:
        """The pools at generation 0."""
        from es_agent.errors import PromptPoolError
        from es_agent.prompts import PromptPools

        file = self.path / "initial_prompt_pools.json"
        if self.chained and file.is_file():
            verify_file_digest(file, self.manifest["files"][file.name], self.path / "run.json",
                               "the prompt pools at generation 0")
        try:
            return PromptPools.from_dict(read_json(file, CheckpointError), source=str(file))
        except PromptPoolError as exc:
            raise CheckpointError(f"corrupt file {file}: {exc}") from None

    def snapshot_dir(self, generation: int) -> Path:
        """Where the snapshot of ``generation`` lives."""
        return self.path / "snapshots" / f"gen_{generation:06d}"

    def load_state(self, generation: int | None = None) -> RunState:
        """The state after the completed generations, or after an earlier ``generation`` (0 is the start):
        the last snapshot at or before it plus the weight updates logged after that snapshot, up to it (see
        the module docstring). A generation the run has not completed: CheckpointError."""
        if generation is None:
            generation = self.generation
        elif isinstance(generation, bool) or not isinstance(generation, int) or not (
                0 <= generation <= self.generation):
            raise CheckpointError(f"generation {generation!r}: {self.path} has completed {self.generation} "
                                  f"generation(s), so 0..{self.generation} can be rebuilt")
        records = self.records()[:generation]
        pools = self.initial_pools()
        if records:
            try:
                dist = CoEvolutionDistribution.from_dict(records[-1]["distribution"])
                for record in records:
                    pools = apply_pool_changes(pools, record.get("pool_changes", ()))
            except (KeyError, TypeError, ValueError) as exc:
                raise CheckpointError(f"corrupt file {self.path / 'update_log.jsonl'}: {exc}") from None
        else:
            dist = initial_distribution(self.config, pools)
        if dist.pool_sizes != tuple(pools.sizes().values()):
            raise CheckpointError(f"{self.path / 'update_log.jsonl'}: replayed pools {pools.sizes()} do not "
                                  f"match the logged distribution {dist.pool_sizes}")
        snapshot, snap_gen, checksum = None, 0, None
        listed = [s for s in self.manifest["snapshots"] if s["generation"] <= generation]
        if listed:
            latest = max(listed, key=lambda s: s["generation"])
            snap_gen = latest["generation"]
            snapshot = verify_snapshot(self.path, latest, self.snapshot_dir(snap_gen), WEIGHTS_FILE,
                                       SNAPSHOT_FORMAT, digests=self.chained)
            if snap_gen == generation:
                checksum = latest["checksum"]
        self._check_final_checksum()
        pending = [(int(r["iter"]), self._weight_update(r)) for r in records if r["iter"] > snap_gen]
        return RunState(generation, dist, pools, snapshot, snap_gen, pending, checksum)

    def _check_final_checksum(self) -> None:
        """``run.json``'s ``checksum`` must be the one its snapshot entry (and ``snapshot.json``) records."""
        final = self.manifest.get("checksum")
        if final is None:
            return
        entry = next((s for s in self.manifest["snapshots"] if s["generation"] == final["generation"]), None)
        if entry is None or entry["checksum"] != final["value"]:
            raise RunIntegrityError(
                f"{self.path / 'run.json'}: 'checksum' of generation {final['generation']} is "
                f"{str(final['value'])[:12]!r}, the snapshot of that generation records "
                f"{(entry or {}).get('checksum', 'nothing')!s:.12}: run.json was edited")

    def _weight_update(self, record: Mapping[str, Any]) -> WeightUpdate:
        """The logged weight update of one record; a malformed one names the file and generation."""
        import math

        try:
            update = WeightUpdate.from_dict(record["update"])
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise CheckpointError(f"corrupt file {self.path / 'update_log.jsonl'}, generation "
                                  f"{record['iter']}: 'update' must hold integer 'seeds' and numeric "
                                  f"'coeffs' ({type(exc).__name__}: {exc})") from None
        if not all(math.isfinite(c) for c in update.coeffs):
            raise CheckpointError(f"corrupt file {self.path / 'update_log.jsonl'}, generation "
                                  f"{record['iter']}: update coefficients must be finite")
        return update

    # ---------------------------------------------------------------------------------------- writing

    def commit(self, record: Mapping[str, Any], status: Mapping[str, Any],
               distribution: CoEvolutionDistribution, pools: PromptPools, *, log_end: int) -> None:
        """Record one completed generation (``record["iter"]`` must be the next one); ``run.json`` last."""
        gen = int(record["iter"])
        if gen != self.generation + 1:
            raise RunDirError(f"{self.path}: generation {gen} committed after {self.generation}")
        entry = json_safe(dict(record))
        chain: dict[str, Any] = {}
        if self.chained:
            entry["prev"] = self.manifest["log_head"]
            chain["log_head"] = record_digest(entry)
        records = [*self.records(), entry]
        metrics = [*self.metrics(), json_safe({**status, "iter": gen})]
        atomic_write_text(self.path / "update_log.jsonl", "".join(_line(r) for r in records))
        atomic_write_text(self.path / "metrics.jsonl", "".join(_line(m) for m in metrics))
        atomic_write_json(self.path / "distribution.json", {"generation": gen, **distribution.to_dict()})
        atomic_write_json(self.path / "prompt_pools.json", {"generation": gen, **pools.to_dict()})
        self._records, self._metrics = records, metrics
        self._write_manifest(generation=gen, log_end=int(log_end), **chain)

    def write_snapshot(self, generation: int, save_weights: Callable[[Path], str], model_spec: str) -> Path:
        """Save the centre after ``generation`` as ``snapshots/gen_<generation>/`` (HF layout) and list it in
        ``run.json``; ``save_weights(file)`` writes the safetensors file and returns the weight checksum."""
        final = self.snapshot_dir(generation)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
        try:
            checksum = save_weights(tmp / WEIGHTS_FILE)
            digest, size = sha256_file(tmp / WEIGHTS_FILE), (tmp / WEIGHTS_FILE).stat().st_size
            write_model_metadata(model_spec, tmp)
            atomic_write_json(tmp / "snapshot.json", {"format": SNAPSHOT_FORMAT, "generation": generation,
                                                      "checksum": checksum, "sha256": digest, "bytes": size,
                                                      "created": _now()})
            os.chmod(tmp, 0o755)
            for file in tmp.iterdir():
                os.chmod(file, 0o644)
            if final.exists():
                shutil.rmtree(final)
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        _fsync_dir(final.parent)
        snapshots = [s for s in self.manifest["snapshots"] if s["generation"] != generation]
        snapshots.append({"generation": generation, "path": str(final.relative_to(self.path)),
                          "checksum": checksum, "sha256": digest})
        self._write_manifest(snapshots=sorted(snapshots, key=lambda s: s["generation"]),
                             checksum={"generation": generation, "value": checksum})
        return final

    def prune_snapshots(self) -> tuple[list[int], int]:
        """Delete every snapshot but the latest, and snapshot folders ``run.json`` no longer lists (left by a
        kill mid-prune); returns the pruned generations and the bytes freed. Nothing is lost: the centre
        after any generation is still rebuilt, from the base model or the kept snapshot plus the logged
        updates (:meth:`load_state`). The caller holds the lock (another writer: RunDirError)."""
        listed = sorted(self.manifest["snapshots"], key=lambda s: s["generation"])
        keep = listed[-1:]
        pruned = [s["generation"] for s in listed[:-1]]
        if pruned:  # run.json first: a kill after it leaves unlisted folders, which the next prune removes
            self._write_manifest(snapshots=keep)
        kept = {self.snapshot_dir(s["generation"]).name for s in keep}
        freed = 0
        folder = self.path / "snapshots"
        for stale in sorted(folder.glob("gen_*")) if folder.is_dir() else ():
            if stale.is_dir() and stale.name not in kept:
                freed += sum(f.stat().st_size for f in stale.rglob("*") if f.is_file())
                shutil.rmtree(stale)
        return pruned, freed

    def has_snapshot(self, generation: int) -> bool:
        """Whether ``run.json`` lists a snapshot of ``generation``."""
        return any(s["generation"] == generation for s in self.manifest["snapshots"])

    def record_tasks(self, tasks: Mapping[str, Any]) -> None:
        """Record the task ids the run resolved at its start (``{"train": [...], "eval": [...]}``) in
        ``run.json``, where a resumed run reads them back."""
        self._write_manifest(tasks=json_safe(dict(tasks)))

    @property
    def resolved(self) -> ResolvedSettings | None:
        """The ``"auto"`` settings recorded when the run started (``None``: a run from before they were)."""
        if "resolved" not in self.manifest:
            return None
        return _resolved(self.manifest, self.path / "run.json")

    def record_resolved(self, settings: ResolvedSettings) -> None:
        """Record the dtype and worker count the run resolved at its start (``run.json``'s ``"resolved"``)
        and use them from now on (:attr:`config` gets the concrete values)."""
        self._write_manifest(resolved=settings.to_dict())
        self.config = with_resolved(self.config, settings)

    def mark_finished(self) -> None:
        """Record that the run completed all its generations."""
        self._write_manifest(finished=True)

    def reopen_for_resume(self) -> None:
        """Take the directory's lock (another writer: RunDirError), check the log, and drop log lines and
        metrics past the last committed generation (a line torn by a crash among them) and the temporary
        files of writes that a kill interrupted."""
        self.lock()
        records, metrics = self.records(), self.metrics()
        if self._torn is not None:
            _log.warning("%s, line %d: dropped a line torn by a crash after generation %d (past run.json)",
                         self.path / "update_log.jsonl", self._torn, self.generation)
            atomic_write_text(self.path / "update_log.jsonl", "".join(_line(r) for r in records))
            atomic_write_text(self.path / "metrics.jsonl", "".join(_line(m) for m in metrics))
            self._torn = None
        for folder in (self.path, self.path / "snapshots"):
            for stale in folder.glob(".*.tmp") if folder.is_dir() else ():
                if stale.is_dir():
                    shutil.rmtree(stale, ignore_errors=True)
                else:
                    stale.unlink(missing_ok=True)

    def lock(self) -> None:
        """Hold the directory's lock until :meth:`release` (or the process ends); RunDirError when another
        process writes the run."""
        self._lock.acquire()

    def release(self) -> None:
        """Drop the directory's lock (a no-op when not held)."""
        self._lock.release()

    def discard(self) -> None:
        """Remove a run that never completed a generation (what :meth:`create` wrote, and the directory when
        it made it), so that a failed start leaves nothing behind; refused once a generation is logged."""
        if self.generation != 0 or (self.path / "update_log.jsonl").exists():
            raise RunDirError(f"{self.path}: refusing to discard a run with logged generations")
        for name in (*_INPUTS, "run.json", "metrics.jsonl"):
            (self.path / name).unlink(missing_ok=True)
        snapshots = self.path / "snapshots"
        if snapshots.is_dir() and not any(snapshots.iterdir()):
            snapshots.rmdir()
        self.release()
        (self.path / LOCK_FILE).unlink(missing_ok=True)
        if self._created and not any(self.path.iterdir()):
            self.path.rmdir()

    def _write_manifest(self, **changes: Any) -> None:
        manifest = {**self.manifest, **changes, "updated": _now()}
        atomic_write_json(self.path / "run.json", manifest)
        self.manifest = manifest


def prune_run(path: str | Path) -> tuple[list[int], int]:
    """Open the run at ``path``, take its lock and keep only its latest snapshot
    (:meth:`RunDir.prune_snapshots`); returns the pruned generations and the bytes freed."""
    run = RunDir.open(path)
    run.lock()
    try:
        return run.prune_snapshots()
    finally:
        run.release()


def write_model_metadata(model_spec: str, dest: Path) -> None:
    """Write ``config.json`` and the tokenizer files of ``model_spec`` into ``dest`` (next to its weights)."""
    from es_agent.specs import TINY_PREFIX

    if model_spec.startswith(TINY_PREFIX):
        from es_agent.tiny import tiny_qwen

        model, tokenizer = tiny_qwen(seed=int(model_spec[len(TINY_PREFIX):]))
        model.config.save_pretrained(dest)
        model.generation_config.save_pretrained(dest)
        tokenizer.save_pretrained(dest)
        return
    from es_agent.models import MANIFEST, resolve_model_path

    source = resolve_model_path(model_spec)
    for file in sorted(source.iterdir()):
        if file.is_file() and file.name != MANIFEST and not file.name.endswith(_WEIGHT_SUFFIXES) \
                and not file.name.endswith(".index.json"):
            shutil.copy2(file, dest / file.name)


def _read_log(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], int | None]:
    """``(line number, record)`` of a JSON-lines file (missing: none) and the number of a torn last line (one
    that does not parse, as a crash mid-write leaves it; ``None`` if there is none). Any other line that is
    not a JSON object raises RunDirError naming the file and line."""
    if not path.exists():
        return [], None
    numbered = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                if line.strip()]
    out: list[tuple[int, dict[str, Any]]] = []
    for i, (number, line) in enumerate(numbered):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(numbered) - 1:
                return out, number
            raise RunDirError(f"corrupt file {path}, line {number}: {exc}") from None
        if not isinstance(item, dict):
            raise RunDirError(f"corrupt file {path}, line {number}: expected a JSON object")
        out.append((number, item))
    return out, None


def _check_manifest(manifest: dict[str, Any], path: Path) -> None:
    """The fields of ``run.json`` that rebuilding a run reads; a bad one is a RunDirError naming it."""
    def bad(key: str, expected: str) -> RunDirError:
        return RunDirError(f"corrupt file {path}: {key} must be {expected}, got {_field(manifest, key)!r}")

    if not _is_int(manifest.get("generation"), 0):
        raise bad("'generation'", "an integer >= 0")
    if not _is_int(manifest.get("total_generations"), 1):
        raise bad("'total_generations'", "an integer >= 1")
    chained = manifest["format"] == RUN_FORMAT
    snapshots = manifest.get("snapshots")
    if not isinstance(snapshots, list):
        raise bad("'snapshots'", "a list")
    seen: set[int] = set()
    for i, entry in enumerate(snapshots):
        key = f"'snapshots'[{i}]"
        expected = ('{"generation": int >= 1, "path": "snapshots/gen_NNNNNN", "checksum": str'
                    + (', "sha256": hex digest}' if chained else "}"))
        if not isinstance(entry, dict) or not _is_int(entry.get("generation"), 1) \
                or not isinstance(entry.get("checksum"), str) \
                or (chained and not DIGEST.match(str(entry.get("sha256")))):
            raise RunDirError(f"corrupt file {path}: {key} must be {expected}, got {entry!r}")
        gen = entry["generation"]
        if entry.get("path") != f"snapshots/gen_{gen:06d}":
            raise RunDirError(f"corrupt file {path}: {key}: path {entry.get('path')!r} is not "
                              f"'snapshots/gen_{gen:06d}' (snapshots live inside the run directory)")
        if gen in seen:
            raise RunDirError(f"corrupt file {path}: {key}: generation {gen} is listed twice")
        seen.add(gen)
    final = manifest.get("checksum")
    if final is not None and not (isinstance(final, dict) and _is_int(final.get("generation"), 1)
                                  and isinstance(final.get("value"), str)):
        raise bad("'checksum'", '{"generation": int >= 1, "value": str} or null')
    if chained:
        if not DIGEST.match(str(manifest.get("log_head"))):
            raise bad("'log_head'", "a SHA-256 hex digest")
        files = manifest.get("files")
        if not isinstance(files, dict) or not all(DIGEST.match(str(files.get(n))) for n in _INPUTS):
            raise bad("'files'", f"SHA-256 hex digests of {list(_INPUTS)}")


def _resolved(manifest: dict[str, Any], path: Path) -> ResolvedSettings:
    try:
        return ResolvedSettings.from_dict(manifest["resolved"])
    except ConfigError as exc:
        raise RunDirError(f"corrupt file {path}: 'resolved': {exc}") from None


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _field(manifest: dict[str, Any], key: str) -> Any:
    return manifest.get(key.strip("'"))


def _line(item: Mapping[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
