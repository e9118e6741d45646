"""Prompt pools (named slots, each a list of text variants, kept in JSON data files) and prompt genomes (one
variant index per slot)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from es_agent.errors import PromptPoolError

REQUIRED_SLOTS = ("system", "skills", "action_format")
"""Slots every pool file must define. Extra slots are allowed and render after these, in file order."""
ACTION_STYLES = ("direct", "reasoning", "labelled")
"""How an ``action_format`` variant asks the model to write its action (guides free-mode extraction)."""
FORMAT_TAG = "esopt-prompt-pools/1"
OBSERVATION_FIELDS = ("axtree", "url", "tabs", "goal", "history", "error")
"""Placeholders the observation template may use, written ``{name}``."""
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class PromptVariant:
    """One text variant of a slot."""

    id: str
    """Name, unique within its slot."""
    text: str
    """The text rendered into the system message (may be empty: the slot is then left out)."""
    style: str = "direct"
    """For ``action_format``: one of :data:`ACTION_STYLES`."""
    action_prefix: str = ""
    """For ``action_format``: what the reply starts with right before the action (constrained decoding starts
    the reply with it), e.g. WebArena's ``In summary, the next action I will perform is `````."""
    action_suffix: str = ""
    """For ``action_format``: what closes the action in the reply (e.g. three backticks); empty means the end
    of the turn."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (defaults left out)."""
        out: dict[str, Any] = {"id": self.id, "text": self.text}
        for name, default in (("style", "direct"), ("action_prefix", ""), ("action_suffix", "")):
            if getattr(self, name) != default:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class PromptPools:
    """Named slots, each a tuple of variants, plus the observation template and named baseline genomes.

    Immutable: :meth:`with_variant` and :meth:`without_variant` return new pools (prompt mutation grows and
    prunes pools during a run; the pools travel with the weight updates as :meth:`to_dict`).
    """

    slots: Mapping[str, tuple[PromptVariant, ...]]
    """Slot name -> variants, in rendering order (required slots first)."""
    observation_template: str
    """User-message template with ``{axtree}``, ``{url}``, ``{tabs}``, ``{goal}``, ``{history}`` and
    ``{error}`` placeholders."""
    baselines: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Baseline name -> {slot: variant id}, e.g. ``no_skill``."""
    source: str = "<dict>"
    """Where the pools were read from (for error messages)."""
    templates: Mapping[str, str] = field(default_factory=dict)
    """Other named observation templates (``observation_templates`` in the file), e.g. ``webarena``: the
    WebArena order with the objective last; :meth:`with_observation_template` makes one the template."""

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> PromptPools:
        """Read a pool file (JSON); ``None`` reads the package's ``pools/default.json``."""
        if path is None:
            ref = resources.files("es_agent.prompts").joinpath("pools", "default.json")
            text, source = ref.read_text(encoding="utf-8"), "es_agent/prompts/pools/default.json"
        else:
            file = Path(path)
            if file.is_dir():
                file = file / "default.json"
            if not file.is_file():
                raise PromptPoolError(f"prompt pool file not found: {file}")
            text, source = file.read_text(encoding="utf-8"), str(file)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PromptPoolError(f"{source}: not valid JSON ({exc})") from exc
        return cls.from_dict(data, source=source)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> PromptPools:
        """Build and validate pools from their JSON form."""
        if not isinstance(data, Mapping) or not isinstance(data.get("slots"), Mapping):
            raise PromptPoolError(f"{source}: expected an object with a 'slots' object")
        raw_slots = data["slots"]
        for slot in REQUIRED_SLOTS:
            if slot not in raw_slots:
                raise PromptPoolError(
                    f"{source}: missing slot {slot!r} (required slots: {list(REQUIRED_SLOTS)})")
        order = [*REQUIRED_SLOTS, *(s for s in raw_slots if s not in REQUIRED_SLOTS)]
        slots = {name: _parse_variants(raw_slots[name], name, source) for name in order}
        template = _join(data.get("observation_template", ""), f"{source}: observation_template")
        unknown = sorted(set(_PLACEHOLDER.findall(template)) - set(OBSERVATION_FIELDS))
        if not template or unknown:
            raise PromptPoolError(f"{source}: observation_template must be non-empty and use only "
                                  f"{list(OBSERVATION_FIELDS)} (unknown: {unknown})")
        templates = {}
        for name, raw in dict(data.get("observation_templates") or {}).items():
            where = f"{source}: observation_templates[{name!r}]"
            text = _join(raw, where)
            bad = sorted(set(_PLACEHOLDER.findall(text)) - set(OBSERVATION_FIELDS))
            if not text or bad:
                raise PromptPoolError(f"{where} must be non-empty and use only {list(OBSERVATION_FIELDS)} "
                                      f"(unknown: {bad})")
            templates[str(name)] = text
        pools = cls(slots=slots, observation_template=template, baselines={}, source=source)
        baselines = {}
        for name, choice in dict(data.get("baselines", {})).items():
            pools.genome(**dict(choice))  # validates slot names and variant ids
            baselines[str(name)] = dict(choice)
        return cls(slots=slots, observation_template=template, baselines=baselines, source=source,
                   templates=templates)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, readable by :meth:`from_dict`."""
        return {
            "format": FORMAT_TAG,
            "slots": {name: [v.to_dict() for v in variants] for name, variants in self.slots.items()},
            "observation_template": self.observation_template,
            "baselines": {name: dict(choice) for name, choice in self.baselines.items()},
            **({"observation_templates": dict(self.templates)} if self.templates else {}),
        }

    def with_observation_template(self, name: str) -> PromptPools:
        """New pools whose observation template is the named one of :attr:`templates` (e.g. ``"webarena"``,
        the template before issue #10)."""
        if name not in self.templates:
            raise PromptPoolError(f"{self.source}: no observation template {name!r} "
                                  f"(known: {sorted(self.templates)})")
        return PromptPools(self.slots, self.templates[name], self.baselines, self.source, self.templates)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the pools as JSON."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        Path(path).write_text(text, encoding="utf-8")

    @property
    def slot_names(self) -> tuple[str, ...]:
        """Slot names in rendering order."""
        return tuple(self.slots)

    def sizes(self) -> dict[str, int]:
        """Number of variants per slot (the categorical sizes of a prompt distribution)."""
        return {name: len(variants) for name, variants in self.slots.items()}

    def index(self, slot: str, variant: str | int) -> int:
        """Index of a variant given by id or index; :class:`PromptPoolError` if there is none."""
        variants = self._variants(slot)
        if isinstance(variant, int):
            if not 0 <= variant < len(variants):
                raise PromptPoolError(f"{self.source}: slot {slot!r} has no variant {variant} "
                                      f"(it has {len(variants)})")
            return variant
        for i, v in enumerate(variants):
            if v.id == variant:
                return i
        raise PromptPoolError(f"{self.source}: slot {slot!r} has no variant {variant!r} "
                              f"(known: {[v.id for v in variants]})")

    def genome(self, **choice: str | int) -> PromptGenome:
        """A genome from variant ids or indices per slot; unnamed slots take variant 0."""
        unknown = sorted(set(choice) - set(self.slots))
        if unknown:
            raise PromptPoolError(f"{self.source}: unknown slot(s) {unknown} (slots: {list(self.slots)})")
        return PromptGenome(self, tuple(self.index(s, choice.get(s, 0)) for s in self.slots))

    def baseline(self, name: str) -> PromptGenome:
        """A named baseline genome, e.g. ``"no_skill"`` (the skills slot is the empty variant)."""
        if name not in self.baselines:
            raise PromptPoolError(f"{self.source}: no baseline {name!r} (known: {sorted(self.baselines)})")
        return self.genome(**self.baselines[name])

    def from_indices(self, indices: Mapping[str, int] | tuple[int, ...]) -> PromptGenome:
        """A genome from a slot->index mapping or a tuple of indices in slot order."""
        if isinstance(indices, Mapping):
            return self.genome(**{k: int(v) for k, v in indices.items()})
        if len(indices) != len(self.slots):
            raise PromptPoolError(f"expected {len(self.slots)} indices (one per slot), got {len(indices)}")
        return self.genome(**{s: int(i) for s, i in zip(self.slots, indices, strict=True)})

    def with_variant(self, slot: str, variant: PromptVariant) -> PromptPools:
        """New pools with ``variant`` appended to ``slot`` (its id must be new in the slot)."""
        variants = self._variants(slot)
        if any(v.id == variant.id for v in variants):
            raise PromptPoolError(f"slot {slot!r} already has a variant {variant.id!r}")
        _check_variant(variant, slot, self.source)
        return self._replace_slot(slot, (*variants, variant))

    def without_variant(self, slot: str, variant: str | int) -> PromptPools:
        """New pools without one variant (a slot keeps at least one; baselines using it are dropped)."""
        variants = self._variants(slot)
        index = self.index(slot, variant)
        if len(variants) == 1:
            raise PromptPoolError(f"slot {slot!r} must keep at least one variant")
        removed = variants[index].id
        pools = self._replace_slot(slot, variants[:index] + variants[index + 1:])
        kept = {n: c for n, c in self.baselines.items() if c.get(slot) != removed}
        return PromptPools(pools.slots, self.observation_template, kept, self.source, self.templates)

    def _replace_slot(self, slot: str, variants: tuple[PromptVariant, ...]) -> PromptPools:
        slots = dict(self.slots)
        slots[slot] = variants
        return PromptPools(slots, self.observation_template, self.baselines, self.source, self.templates)

    def _variants(self, slot: str) -> tuple[PromptVariant, ...]:
        if slot not in self.slots:
            raise PromptPoolError(f"{self.source}: unknown slot {slot!r} (slots: {list(self.slots)})")
        return self.slots[slot]


@dataclass(frozen=True)
class PromptGenome:
    """One variant index per slot of a :class:`PromptPools` (the pools travel along: they are small)."""

    pools: PromptPools
    """The pools the indices point into."""
    indices: tuple[int, ...]
    """Variant index per slot, in ``pools.slot_names`` order."""

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.pools.slots):
            raise PromptPoolError(f"genome has {len(self.indices)} indices for {len(self.pools.slots)} slots")
        for slot, index in zip(self.pools.slots, self.indices, strict=True):
            self.pools.index(slot, index)

    def variant(self, slot: str) -> PromptVariant:
        """The chosen variant of a slot."""
        return self.pools.slots[slot][self.choice[slot]]

    @property
    def choice(self) -> dict[str, int]:
        """Slot -> variant index."""
        return dict(zip(self.pools.slots, self.indices, strict=True))

    @property
    def ids(self) -> dict[str, str]:
        """Slot -> variant id (a readable name of the genome)."""
        return {slot: self.variant(slot).id for slot in self.pools.slots}

    @property
    def action_format(self) -> PromptVariant:
        """The chosen ``action_format`` variant (its style, prefix and suffix steer decoding)."""
        return self.variant("action_format")

    def system_text(self) -> str:
        """The system message: the chosen texts of every slot in order, blank-line separated (empty texts
        left out)."""
        return "\n\n".join(t for t in (self.variant(s).text.strip() for s in self.pools.slots) if t)

    def replace(self, **choice: str | int) -> PromptGenome:
        """A copy with some slots set to other variants (ids or indices)."""
        merged: dict[str, str | int] = dict(self.choice)
        merged.update(choice)
        return self.pools.genome(**merged)

    def __repr__(self) -> str:
        return f"PromptGenome({self.ids})"


def _join(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    raise PromptPoolError(f"{where}: text must be a string or a list of strings, got {type(value).__name__}")


def _parse_variants(raw: Any, slot: str, source: str) -> tuple[PromptVariant, ...]:
    if not isinstance(raw, list) or not raw:
        raise PromptPoolError(f"{source}: slot {slot!r} must be a non-empty list of variants")
    variants: list[PromptVariant] = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            item = {"id": f"{slot}_{i}", "text": item}
        if not isinstance(item, Mapping) or "text" not in item:
            raise PromptPoolError(f"{source}: slot {slot!r} variant {i} needs a 'text'")
        where = f"{source}: slot {slot!r} variant {item.get('id', i)!r}"
        extra = sorted(set(item) - {"id", "text", "style", "action_prefix", "action_suffix"})
        if extra:
            raise PromptPoolError(f"{where}: unknown field(s) {extra}")
        variant = PromptVariant(
            id=str(item.get("id", f"{slot}_{i}")), text=_join(item["text"], where),
            style=str(item.get("style", "direct")), action_prefix=str(item.get("action_prefix", "")),
            action_suffix=str(item.get("action_suffix", "")))
        if any(v.id == variant.id for v in variants):
            raise PromptPoolError(f"{where}: duplicate variant id")
        _check_variant(variant, slot, source)
        variants.append(variant)
    return tuple(variants)


def _check_variant(variant: PromptVariant, slot: str, source: str) -> None:
    if variant.style not in ACTION_STYLES:
        raise PromptPoolError(f"{source}: slot {slot!r} variant {variant.id!r}: style {variant.style!r} is "
                              f"not one of {list(ACTION_STYLES)}")
