"""A bridge's chain of transforms, read from Kafka Connect's keys (`transforms`, `transforms.<alias>.type`, its
`predicate` and `negate` and the class's own keys; `predicates`, `predicates.<alias>.type` and its keys), and run on
each record in the order the `transforms` list gives."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import ValidationError

from connectors.errors import RecordError
from connectors.transforms.classes import PredicateClass, TransformClass, TransformConfig, Transformation
from connectors.transforms.headers import DropHeaders, InsertHeader
from connectors.transforms.record import ConnectRecord
from connectors.transforms.routing import Filter, RegexRouter, TimestampRouter
from connectors.transforms.sides import Side

TRANSFORMS, PREDICATES = "transforms", "predicates"
_STAGE_KEYS = ("type", "predicate", "negate")


def is_chain_key(key: str) -> bool:
    """Whether a connector key belongs to the transforms and predicates (not to the connector)."""
    return key in (TRANSFORMS, PREDICATES) or key.startswith((TRANSFORMS + ".", PREDICATES + "."))


class TransformFailed(RecordError):
    """A transform could not handle a record (Kafka Connect's TRANSFORMATION stage): errors.tolerance decides."""

    stage = "TRANSFORMATION"


@dataclass(frozen=True)
class PredicateStage:
    alias: str
    predicate: PredicateClass
    keys: TransformConfig


# The transforms that never look inside a key or value.
_COLUMNAR_TRANSFORMS = (Filter, InsertHeader, DropHeaders, RegexRouter, TimestampRouter)


@dataclass(frozen=True)
class Stage:
    alias: str
    transform: TransformClass
    side: Side | None
    keys: TransformConfig
    predicate: PredicateStage | None = None
    negate: bool = False

    @property
    def runs_columnar(self) -> bool:
        """Whether this stage never looks inside a key or value, so columnar.py runs it on whole batches (its
        predicate, any of Kafka's, reads the topic, the headers and whether the value is null)."""
        return self.transform.build in _COLUMNAR_TRANSFORMS

    def failed(self, why: object) -> TransformFailed:
        """This stage's failure on a record, naming its alias and class."""
        return TransformFailed(f"transform '{self.alias}' ({self.class_name}): {why}")

    @property
    def class_name(self) -> str:
        return self.transform.short_name + (f"${self.side.name.capitalize()}" if self.side else "")


@dataclass(frozen=True)
class TransformChain:
    """The validated chain (plain data, sent to Spark tasks); `running()` builds the objects that transform."""

    stages: tuple[Stage, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.stages)

    @property
    def renames_topics(self) -> bool:
        """Whether a stage may give a record another topic (Kafka's routers, or a package's transform)."""
        return any(stage.transform.renames_topics for stage in self.stages)

    def topic_after(self, topic: str) -> str | None:
        """The topic a record of `topic` has after the chain when its topic alone decides it (RegexRouters without
        a predicate); None when its timestamp, headers or contents may (TimestampRouter, a predicate, a package's
        router). For lineage: where a routed sink's records of a source topic go."""
        for stage in self.stages:
            if not stage.transform.renames_topics:
                continue
            if stage.transform.build is not RegexRouter or stage.predicate is not None:
                return None
            topic = RegexRouter(stage.keys).rename(topic)
        return topic

    @property
    def reads_headers(self) -> bool:
        """Whether a stage's outcome depends on the headers a record came with."""
        return any(stage.transform.reads_headers or (stage.predicate and stage.predicate.predicate.reads_headers)
                   for stage in self.stages)

    @property
    def runs_columnar(self) -> bool:
        return all(stage.runs_columnar for stage in self.stages)

    def running(self) -> RunningChain:
        return RunningChain(self)


class RunningChain:
    def __init__(self, chain: TransformChain):
        self.steps: list[tuple[Stage, Transformation, Any]] = []
        for stage in chain.stages:
            build = stage.transform.build
            transform = build(stage.keys, stage.side) if stage.side is not None else build(stage.keys)
            predicate = stage.predicate.predicate.build(stage.predicate.keys) if stage.predicate else None
            self.steps.append((stage, transform, predicate))

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        """The record after every transform (those whose predicate passes), or None when one dropped it; a transform
        that fails raises TransformFailed naming its alias."""
        for stage, transform, predicate in self.steps:
            try:
                if predicate is not None and predicate.test(record) == stage.negate:
                    continue
                record = transform.apply(record)
            except Exception as exc:  # noqa: BLE001 - any failure of a transform is the record's, as in Kafka
                raise stage.failed(exc) from exc
            if record is None:
                return None
        return record


def load_chain(keys: Mapping[str, Any]) -> TransformChain:
    """The chain the keys describe; ValueError listing every problem, a line each naming the key."""
    problems: list[str] = []
    predicates = _load_predicates(keys, problems)
    aliases = _aliases(keys, TRANSFORMS, problems)
    stages = []
    for alias in aliases:
        stage = _load_stage(alias, keys, predicates, problems)
        if stage is not None:
            stages.append(stage)
    problems += _strays(keys, TRANSFORMS, aliases) + _strays(keys, PREDICATES, list(predicates))
    if problems:
        raise ValueError("\n".join(problems))
    return TransformChain(tuple(stages))


def _aliases(keys: Mapping[str, Any], which: str, problems: list[str]) -> list[str]:
    listed = keys.get(which)
    if listed is None:
        return []
    items = listed if isinstance(listed, (list, tuple)) else str(listed).split(",")
    aliases = [str(item).strip() for item in items if str(item).strip()]
    for alias in {a for a in aliases if aliases.count(a) > 1}:
        problems.append(f"key '{which}': {alias!r} is listed twice")
    return list(dict.fromkeys(aliases))


def _own_keys(keys: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in keys.items() if k.startswith(prefix)}


def _load_predicates(keys: Mapping[str, Any], problems: list[str]) -> dict[str, PredicateStage | None]:
    from connectors.transforms.catalog import find_predicate  # the classes are imported by a bridge that has a chain

    loaded: dict[str, PredicateStage | None] = {}
    for alias in _aliases(keys, PREDICATES, problems):
        prefix = f"{PREDICATES}.{alias}."
        own = _own_keys(keys, prefix)
        class_name = own.pop("type", None)
        loaded[alias] = None
        if not class_name:
            problems.append(f"key '{prefix}type': required, not set (predicate '{alias}')")
            continue
        try:
            predicate = find_predicate(str(class_name))
        except ValueError as exc:
            problems.append(f"key '{prefix}type': {exc}")
            continue
        config = _validated(predicate.config_model, own, prefix, f"predicate '{alias}' ({predicate.short_name})",
                            problems)
        if config is not None:
            loaded[alias] = PredicateStage(alias, predicate, config)
    return loaded


def _load_stage(alias: str, keys: Mapping[str, Any], predicates: dict[str, PredicateStage | None],
                problems: list[str]) -> Stage | None:
    from connectors.transforms.catalog import find_transform

    prefix = f"{TRANSFORMS}.{alias}."
    own = _own_keys(keys, prefix)
    class_name = own.pop("type", None)
    predicate_alias, negate = own.pop("predicate", None), own.pop("negate", None)
    if not class_name:
        problems.append(f"key '{prefix}type': required, not set (transform '{alias}')")
        return None
    try:
        transform, side = find_transform(str(class_name))
    except ValueError as exc:
        problems.append(f"key '{prefix}type': {exc}")
        return None
    label = f"transform '{alias}' ({transform.short_name})"
    predicate = None
    if predicate_alias is not None:
        if str(predicate_alias) not in predicates:
            problems.append(f"key '{prefix}predicate': {predicate_alias!r} is not in 'predicates' ({label})")
        predicate = predicates.get(str(predicate_alias))
    negated = False
    if negate is not None:
        text = str(negate).strip().lower()
        if text not in ("true", "false"):
            problems.append(f"key '{prefix}negate': true or false (got {negate!r}) ({label})")
        elif predicate_alias is None:
            problems.append(f"key '{prefix}negate': needs {prefix}predicate ({label})")
        negated = text == "true"
    config = _validated(transform.config_model, own, prefix, label, problems)
    if config is None or (predicate_alias is not None and predicate is None):
        return None
    return Stage(alias, transform, side, config, predicate, negated)


def _validated(model: type[TransformConfig], own: dict[str, Any], prefix: str, label: str,
               problems: list[str]) -> TransformConfig | None:
    try:
        return model.model_validate(own)
    except ValidationError as exc:
        known = [f.alias or name for name, f in model.model_fields.items()]
        for err in exc.errors():
            problems.append(_describe(err, prefix, known, label))
        return None


def _describe(err: dict, prefix: str, known: list[str], label: str) -> str:
    key = ".".join(str(part) for part in err["loc"])
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(key, known + list(_STAGE_KEYS), n=1, cutoff=0.6)
        hint = f"did you mean '{prefix}{close[0]}'? " if close else ""
        expected = ", ".join(known) or "none besides type"
        return f"key '{prefix}{key}': unknown key ({hint}{label} takes: {expected})"
    if err["type"] == "missing":
        return f"key '{prefix}{key}': required, not set ({label})"
    message = err["msg"].removeprefix("Value error, ")
    if not key:
        return f"{label}: {message}"
    return f"key '{prefix}{key}': {message} (got {err.get('input')!r}) ({label})"


def _strays(keys: Mapping[str, Any], which: str, aliases: list[str]) -> list[str]:
    """Keys under `transforms.` or `predicates.` of an alias the list does not name (a typo, or a stage taken out of
    the list and left behind)."""
    problems = []
    for key in keys:
        if key.startswith(which + "."):
            alias = key[len(which) + 1:].split(".", 1)[0]
            if alias not in aliases:
                problems.append(f"key '{key}': '{alias}' is not listed in '{which}'")
    return problems
