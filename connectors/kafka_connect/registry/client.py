"""One Schema Registry client per registry and credentials in a process, and errors without credentials."""

from __future__ import annotations

import re
import threading
from typing import Any, Callable, TypeVar

from connectors.kafka_connect.errors import ConversionError
from connectors.kafka_connect.registry.settings import RegistrySettings

_clients: dict[tuple, Any] = {}
_lock = threading.Lock()
_URL_USER_INFO = re.compile(r"(//)[^/@\s]+@")
T = TypeVar("T")


def registry_client(settings: RegistrySettings):
    """confluent-kafka's client (it caches schemas by id and subject); created on first use in the
    process that converts, since clients do not pickle into Spark tasks."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    secret = settings.user_info.get_secret_value() if settings.user_info else None
    identity = (settings.urls, settings.credentials_source, secret)
    with _lock:
        client = _clients.get(identity)
        if client is None:
            conf: dict[str, Any] = {"url": ",".join(settings.urls), "timeout": 10, "max.retries": 2}
            if settings.credentials_source == "USER_INFO":
                if not secret:
                    raise ConversionError("basic.auth.credentials.source=USER_INFO needs basic.auth.user.info")
                conf["basic.auth.credentials.source"] = "USER_INFO"
                conf["basic.auth.user.info"] = secret
            client = _clients[identity] = SchemaRegistryClient(conf)
        return client


def redact(text: str, settings: RegistrySettings) -> str:
    """An error's text with the registry credentials taken out (user info in a URL or the configured one)."""
    text = _URL_USER_INFO.sub(r"\1***@", text)
    if settings.user_info:
        secret = settings.user_info.get_secret_value()
        for part in {secret, *secret.split(":", 1)}:
            if len(part) >= 3:
                text = text.replace(part, "***")
    return text


def call_registry(settings: RegistrySettings, what: str, call: Callable[[], T]) -> T:
    """A registry request; any failure (down, unknown id, refused) becomes a ConversionError, so the
    record goes through errors.tolerance like any other record that cannot be converted."""
    try:
        return call()
    except ConversionError:
        raise
    except Exception as exc:  # the client raises SchemaRegistryError and httpx's transport errors
        raise ConversionError(redact(f"Schema Registry: {what} failed: {exc}", settings)) from None
