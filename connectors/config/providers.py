"""Kafka Connect's config providers: a key's value may be `${provider:path:key}` (or `${provider:key}`), so a
secret lives in the environment, a properties file or a mounted secret directory instead of the bridges file.
A plain key's reference is resolved when the bridges file loads (its value is validated with the rest); a
secret key's reference is only checked then (its provider exists) and resolved where it is used: in the run
(or sensor) that needs it, before a batch, never in the webserver.

Built in, as Kafka Connect names them: `env` (`${env:VAR}`, EnvVarConfigProvider), `file`
(`${file:/path/creds.properties:key}`, FileConfigProvider) and `directory` (`${directory:/run/secrets:name}`,
the content of the file `name` in the folder, DirectoryConfigProvider). Others (a Vault or Secret Manager
provider) are entry points in the group `kafka_pubsub_bridge.config_providers`: an object with
`get(path: str, keys: set[str]) -> dict[str, str]`, Kafka's ConfigProvider.get. An error names the key, the
provider and the path, never a value.
"""

from __future__ import annotations

import functools
import os
import re
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

import javaproperties

ENTRY_POINT_GROUP = "kafka_pubsub_bridge.config_providers"
# Kafka's ConfigTransformer pattern: ${provider:[path:]key}.
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


class ConfigProviderError(ValueError):
    """A reference that cannot be resolved."""


class ConfigProvider(Protocol):
    def get(self, path: str, keys: set[str]) -> dict[str, str]: ...


class EnvVarConfigProvider:
    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        missing = sorted(k for k in keys if k not in os.environ)
        if missing:
            raise ConfigProviderError(f"environment variable {', '.join(missing)} is not set")
        return {k: os.environ[k] for k in keys}


class FileConfigProvider:
    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        try:
            with open(path, encoding="utf-8") as fh:
                values = javaproperties.load(fh)
        except OSError as exc:
            raise ConfigProviderError(f"cannot read {path}: {exc.strerror}") from None
        missing = sorted(keys - set(values))
        if missing:
            raise ConfigProviderError(f"{path} has no key {', '.join(missing)}")
        return {k: values[k] for k in keys}


class DirectoryConfigProvider:
    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        found = {}
        for key in keys:
            file = Path(path) / key
            if Path(key).name != key:  # a key is a file name in the folder, never a path out of it
                raise ConfigProviderError(f"{key!r} is not a file name")
            try:
                found[key] = file.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigProviderError(f"cannot read {file}: {exc.strerror}") from None
        return found


BUILT_IN: dict[str, ConfigProvider] = {
    "env": EnvVarConfigProvider(), "file": FileConfigProvider(), "directory": DirectoryConfigProvider(),
}


@functools.cache
def installed_providers() -> dict[str, ConfigProvider]:
    providers = dict(BUILT_IN)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception as exc:  # noqa: BLE001 - any import error of a provider is reported the same way
            raise ConfigProviderError(f"config provider entry point {point.name} = {point.value} does not load: "
                                      f"{type(exc).__name__}: {exc}") from exc
        providers[point.name] = loaded() if isinstance(loaded, type) else loaded
    return providers


def resolve(key: str, value: object) -> object:
    """`value` with every reference replaced; a value without one is returned as it is."""
    if not isinstance(value, str) or "${" not in value:
        return value
    providers = installed_providers()

    def substitute(match: re.Match) -> str:
        name, path, wanted = match.group(1), match.group(3) or "", match.group(4)
        provider = providers.get(name)
        if provider is None:
            raise ConfigProviderError(f"key '{key}': unknown config provider {name!r} (installed: "
                                      f"{', '.join(sorted(providers))})")
        try:
            return provider.get(path, {wanted})[wanted]
        except ConfigProviderError as exc:
            raise ConfigProviderError(f"key '{key}': {exc}") from None

    return REFERENCE.sub(substitute, value)


def check_reference(key: str, value: object) -> None:
    """A secret key's reference names an installed provider (nothing is read)."""
    if not isinstance(value, str):
        return
    providers = installed_providers()
    for match in REFERENCE.finditer(value):
        if match.group(1) not in providers:
            raise ConfigProviderError(f"key '{key}': unknown config provider {match.group(1)!r} (installed: "
                                      f"{', '.join(sorted(providers))})")
