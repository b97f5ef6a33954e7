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


_ACCEPTED = "accepted so that a deployment's file loads; changes nothing here"
# (field suffix, key suffix, type, default, description). Both prefixes get the same keys; only the strategy of
# the converter's own role is read (Confluent's converters accept both names on either side too).
_KEYS = (
    ("schema_registry_url", "schema.registry.url", str | None, None,
     "a registry converter's Schema Registry: a comma list of http(s) URLs (a URL may carry user:password@)"),
    ("basic_auth_credentials_source", "basic.auth.credentials.source", CredentialsSource, "URL",
     "`URL`: credentials from the registry URL; `USER_INFO`: from basic.auth.user.info"),
    ("basic_auth_user_info", "basic.auth.user.info", SecretStr | None, None,
     "user:password for the registry (write it as ${env:NAME}; never printed)"),
    ("auto_register_schemas", "auto.register.schemas", bool, True,
     "a source registers the schema of what it writes under its subject (false: only looks it up there)"),
    ("use_latest_version", "use.latest.version", bool, False,
     "a source writes with the subject's latest schema instead of registering its own"),
    ("latest_compatibility_strict", "latest.compatibility.strict", bool, True, _ACCEPTED),
    ("normalize_schemas", "normalize.schemas", bool, False,
     "a source's schema is normalized by the registry before it is registered or looked up"),
    ("key_subject_name_strategy", "key.subject.name.strategy", SubjectNameStrategy, TOPIC_NAME_STRATEGY,
     "how a key's subject is named (Confluent's class names): <topic>-key, the record's name, or both"),
    ("value_subject_name_strategy", "value.subject.name.strategy", SubjectNameStrategy, TOPIC_NAME_STRATEGY,
     "how a value's subject is named (Confluent's class names): <topic>-value, the record's name, or both"),
    ("connect_meta_data", "connect.meta.data", bool, True,
     "Avro schemas a source writes carry Connect's own properties (connect.name, connect.version, ...)"),
    ("enhanced_avro_schema_support", "enhanced.avro.schema.support", bool, False, _ACCEPTED),
    ("schemas_cache_size", "schemas.cache.size", int, 1000, _ACCEPTED),
)


def _prefixed_keys(prefix: str) -> type[BaseModel]:
    fields = {f"{prefix}_converter_{name}": (kind, Field(default, alias=f"{prefix}.converter.{key}",
                                                         description=description))
              for name, key, kind, default, description in _KEYS}
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
