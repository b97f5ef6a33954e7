"""What a transform or predicate class declares (its Kafka class name, its keys' model, how it is built), and the
types its keys use; Kafka's classes and a package's own are declared alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Callable, Protocol

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from connectors.transforms.record import ConnectRecord

KAFKA_TRANSFORMS = "org.apache.kafka.connect.transforms"
KAFKA_PREDICATES = "org.apache.kafka.connect.transforms.predicates"


class TransformConfig(BaseModel):
    """Base of a transform's or predicate's keys (those after `transforms.<alias>.`): strict, immutable, by alias."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)


def _comma_list(value: Any) -> Any:
    """Kafka's LIST type: a comma list (blanks around items dropped), or a YAML list."""
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    return value


def _not_empty(items: tuple[str, ...]) -> tuple[str, ...]:
    if not items:
        raise ValueError("give at least one")
    return items


# A Kafka Connect LIST key; one that needs at least one item.
CommaList = Annotated[tuple[str, ...], BeforeValidator(_comma_list)]
NonEmptyCommaList = Annotated[tuple[str, ...], BeforeValidator(_comma_list), AfterValidator(_not_empty)]
# The key several of Kafka's transforms have (`= True`, its default).
ReplaceNullWithDefault = Annotated[bool, Field(
    alias="replace.null.with.default",
    description="Kafka's key (true: a null field takes its schema's default); fields carry no default value here, "
                "so a null stays null")]


class Transformation(Protocol):
    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        """The transformed record, or None to drop it."""
        ...


class Predicate(Protocol):
    def test(self, record: ConnectRecord) -> bool: ...


@dataclass(frozen=True)
class TransformClass:
    java_class: str  # the class name a .properties file gives, without $Key / $Value
    config_model: type[TransformConfig]
    build: Callable[..., Transformation]  # (config) or, with sides, (config, side)
    summary: str
    sides: bool = False  # Kafka has it as `$Key` and `$Value`, and a file names one
    # What the bridge must allow for (a package's class is taken to do both unless it says otherwise): it may give a
    # record another topic; its outcome depends on the headers a record came with (then the Kafka reader reads them).
    renames_topics: bool = True
    reads_headers: bool = True

    @property
    def short_name(self) -> str:
        return self.java_class.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class PredicateClass:
    java_class: str
    config_model: type[TransformConfig]
    build: Callable[[Any], Predicate]
    summary: str
    reads_headers: bool = True  # its answer depends on the headers a record came with

    @property
    def short_name(self) -> str:
        return self.java_class.rsplit(".", 1)[-1]


def kafka_transform(name: str, config_model: type[TransformConfig], build: Callable[..., Transformation], summary: str,
                    sides: bool = False, renames_topics: bool = False) -> TransformClass:
    """One of Apache Kafka's transforms (none of them reads the headers a record came with)."""
    return TransformClass(f"{KAFKA_TRANSFORMS}.{name}", config_model, build, summary, sides, renames_topics,
                          reads_headers=False)


def kafka_predicate(name: str, config_model: type[TransformConfig], build: Callable[[Any], Predicate], summary: str,
                    reads_headers: bool = False) -> PredicateClass:
    """One of Apache Kafka's predicates."""
    return PredicateClass(f"{KAFKA_PREDICATES}.{name}", config_model, build, summary, reads_headers)
