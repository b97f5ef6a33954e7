"""Which transform and predicate classes a bridges file may name: Apache Kafka's own (by their full or short class
names) and those of installed Python packages, registered in the entry point group `kafka_pubsub_bridge.transforms`
as a `TransformClass` or `PredicateClass` value (as a Connect user drops an SMT jar on the plugin path)."""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

from connectors.transforms import casts, fields, flatten, headers, predicates, routing, schemas
from connectors.transforms.classes import PredicateClass, TransformClass
from connectors.transforms.sides import SIDES, Side

ENTRY_POINT_GROUP = "kafka_pubsub_bridge.transforms"
KAFKA_CLASSES = (*casts.CLASSES, *fields.CLASSES, *flatten.CLASSES, *headers.CLASSES, *routing.CLASSES,
                 *schemas.CLASSES, *predicates.CLASSES)


@functools.cache
def installed() -> tuple[TransformClass | PredicateClass, ...]:
    """Kafka's classes, then those of installed packages (a package's class cannot take a Kafka class's name)."""
    plugins = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        value = entry.load()
        if not isinstance(value, (TransformClass, PredicateClass)):
            raise TypeError(f"entry point {entry.name} in {ENTRY_POINT_GROUP} is not a TransformClass or "
                            f"PredicateClass")
        taken = {name for kafka in KAFKA_CLASSES for name in (kafka.java_class, kafka.short_name)}
        if value.java_class in taken or value.short_name in taken:
            raise TypeError(f"entry point {entry.name} in {ENTRY_POINT_GROUP}: {value.java_class} takes the name of "
                            "one of Kafka's transforms or predicates; give it another")
        plugins.append(value)
    return (*KAFKA_CLASSES, *plugins)


def _named(name: str, kind: type) -> TransformClass | PredicateClass | None:
    for found in installed():
        if isinstance(found, kind) and name in (found.java_class, found.short_name):
            return found
    return None


def find_transform(name: str) -> tuple[TransformClass, Side | None]:
    """The transform class and side a `type` names (`org.apache.kafka.connect.transforms.InsertField$Value`,
    `InsertField$Value`); ValueError in one line saying what was expected."""
    base, _, variant = name.strip().partition("$")
    found = _named(base, TransformClass)
    if found is None:
        raise ValueError(f"unknown transform class {name!r}; known: "
                         f"{', '.join(t.short_name for t in installed() if isinstance(t, TransformClass))}")
    if found.sides:
        if variant not in SIDES:
            raise ValueError(f"{found.short_name} works on the key or the value: name "
                             f"{found.short_name}$Key or {found.short_name}$Value")
        return found, SIDES[variant]
    if variant:
        raise ValueError(f"{found.short_name} has no ${variant} variant")
    return found, None


def find_predicate(name: str) -> PredicateClass:
    found = _named(name.strip(), PredicateClass)
    if found is None:
        raise ValueError(f"unknown predicate class {name!r}; known: "
                         f"{', '.join(p.short_name for p in installed() if isinstance(p, PredicateClass))}")
    return found
