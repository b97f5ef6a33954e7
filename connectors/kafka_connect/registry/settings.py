"""The keys Confluent's registry converters read after `key.converter.` / `value.converter.`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, create_model

TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
RECORD_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
TOPIC_RECORD_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
SubjectNameStrategy = Literal[
    "io.confluent.kafka.serializers.subject.TopicNameStrategy",
    "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
]
CredentialsSource = Literal["URL", "USER_INFO"]


@dataclass(frozen=True)
class RegistrySettings:
    """What one registry converter (of a key or of a value) is configured with."""

    urls: tuple[str, ...] = field(repr=False)  # a URL may carry user:password@
    is_key: bool = False
    credentials_source: str = "URL"
    user_info: SecretStr | None = None
    auto_register_schemas: bool = True
    use_latest_version: bool = False
    normalize_schemas: bool = False
    subject_name_strategy: str = TOPIC_NAME_STRATEGY
    connect_meta_data: bool = True


# (field suffix, key suffix, type, default). Both prefixes get the same keys; only the strategy of the
# converter's own role is read (Confluent's converters accept both names on either side too).
_KEYS = (
    ("schema_registry_url", "schema.registry.url", str | None, None),
    ("basic_auth_credentials_source", "basic.auth.credentials.source", CredentialsSource, "URL"),
    ("basic_auth_user_info", "basic.auth.user.info", SecretStr | None, None),
    ("auto_register_schemas", "auto.register.schemas", bool, True),
    ("use_latest_version", "use.latest.version", bool, False),
    ("latest_compatibility_strict", "latest.compatibility.strict", bool, True),
    ("normalize_schemas", "normalize.schemas", bool, False),
    ("key_subject_name_strategy", "key.subject.name.strategy", SubjectNameStrategy, TOPIC_NAME_STRATEGY),
    ("value_subject_name_strategy", "value.subject.name.strategy", SubjectNameStrategy, TOPIC_NAME_STRATEGY),
    ("connect_meta_data", "connect.meta.data", bool, True),
    ("enhanced_avro_schema_support", "enhanced.avro.schema.support", bool, False),
    ("schemas_cache_size", "schemas.cache.size", int, 1000),
)


def _prefixed_keys(prefix: str) -> type[BaseModel]:
    fields = {f"{prefix}_converter_{name}": (kind, Field(default, alias=f"{prefix}.converter.{key}"))
              for name, key, kind, default in _KEYS}
    return create_model(f"{prefix.title()}RegistryConverterKeys", **fields)


KeyRegistryKeys = _prefixed_keys("key")
ValueRegistryKeys = _prefixed_keys("value")


def registry_settings(config: BaseModel, role: Literal["key", "value"]) -> RegistrySettings | None:
    """The settings of the role's converter, or None when no schema.registry.url is set."""
    def get(name: str):
        return getattr(config, f"{role}_converter_{name}")

    url = get("schema_registry_url")
    if not url:
        return None
    return RegistrySettings(
        urls=tuple(u.strip() for u in url.split(",") if u.strip()), is_key=role == "key",
        credentials_source=get("basic_auth_credentials_source"), user_info=get("basic_auth_user_info"),
        auto_register_schemas=get("auto_register_schemas"), use_latest_version=get("use_latest_version"),
        normalize_schemas=get("normalize_schemas"),
        subject_name_strategy=get(f"{role}_subject_name_strategy"), connect_meta_data=get("connect_meta_data"),
    )
