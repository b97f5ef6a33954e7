"""The docs' key tables are what the connectors' config models say: regenerate them with
`python -m bridgectl.generated_docs` when this fails."""

from __future__ import annotations

from bridgectl.generated_docs import key_table, pages
from connectors.pubsublite_source.config import PubSubLiteSourceConfig


def test_the_committed_key_pages_are_the_generated_ones():
    stale = [str(path) for path, text in pages().items() if not path.exists() or path.read_text() != text]
    assert not stale, f"regenerate with python -m bridgectl.generated_docs: {stale}"


def test_a_key_row_says_its_type_default_secrecy_and_meaning():
    table = key_table(PubSubLiteSourceConfig)
    assert "| `exactly.once.support` | `requested` \\| `required` | `requested` | `required`: records" in table
    assert "| `pubsublite.subscription` | text | required | the Lite subscription read |" in table
    assert "| `gcp.credentials.json` | text (secret) | none | a service account key as JSON" in table
    assert "bridge-offsets.&lt;bridge name&gt;" in table  # not read as an HTML tag


def test_every_key_of_every_connector_says_what_it_does():
    from connectors.plugins import installed_plugins

    undescribed = [f"{name}: {field.alias or key}" for name, plugin in installed_plugins().items()
                   for key, field in plugin.config_model.model_fields.items() if not field.description]
    assert not undescribed, undescribed
