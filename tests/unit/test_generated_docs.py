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


def test_the_committed_comparisons_are_what_the_results_files_say():
    from bench.comparisons import TABLE_FILE, table

    assert TABLE_FILE.read_text() == table(), "regenerate with python -m bench.comparisons, then bridgectl.generated_docs"


def test_a_comparison_row_takes_medians_and_says_met_only_when_both_targets_are():
    from bench.comparisons import Comparison, row

    def side(seconds_and_cpu):
        return [{"records": 1000, "seconds": s, "cpu_per_100k": c} for s, c in seconds_and_cpu]

    comparison = Comparison("a sink", "x.json", "ours", "java", "Java", 2.0, 0.5)
    results = {"date": "2026-01-02", "cores": 2, "rounds": 3, "commit": "abc1234",
               "ours": side([(1.0, 0.4), (0.5, 0.5), (0.4, 0.3)]), "java": side([(2.0, 1.0), (1.0, 1.0), (4.0, 0.9)])}
    line = row(comparison, results)
    # ours: 1,000 / 2,000 / 2,500 records/s, median 2,000; Java's median 500; CPU 0.40 against 1.00
    assert "| 2,000 (1,000-2,500) | 500 (250-1,000) | 4.00 | 0.40 / 1.00 (0.40) |" in line
    assert "| met | 2026-01-02, 2 cores, commit abc1234, 3 rounds (`bench/x.json`) |" in line
    results["ours"] = side([(1.0, 0.6), (0.5, 0.6), (0.4, 0.6)])  # as fast, at 0.6x the CPU
    assert "| **missed** | 2026-01-02" in row(comparison, results)
    del results["commit"]
    assert "commit not recorded" in row(comparison, results)


def _connector_pages():
    from bridgectl.generated_docs import CONNECTOR_PAGES
    from connectors.plugins import installed_plugins

    return [(plugin, CONNECTOR_PAGES / f"{name}.md") for name, plugin in sorted(installed_plugins().items())
            if (CONNECTOR_PAGES / f"{name}.md").exists()]


def test_every_connector_page_has_the_one_shape():
    from bridgectl.generated_docs import CONNECTOR_SECTIONS

    for plugin, page in _connector_pages():
        headings = [line[3:] for line in page.read_text().splitlines() if line.startswith("## ")]
        expected = [s for s in CONNECTOR_SECTIONS
                    if s != "Differences from" or any(h.startswith(s) for h in headings)]
        assert [next((s for s in expected if h.startswith(s)), h) for h in headings] == expected, (page, headings)
        first = page.read_text().split("\n\n")[1]
        assert not first.startswith("#") and len(first) > 40, f"{page}: opens with a summary paragraph"


def test_a_connector_pages_example_is_one_bridge_in_both_forms(tmp_path):
    """The YAML entry and the .properties file a page shows load into the same bridge, through the bridges file."""
    import re

    from connectors.bridges_file import load_bridges

    for plugin, page in _connector_pages():
        text = page.read_text()
        [entry] = re.findall(r"```yaml\nbridges:\n(.*?)```", text, re.S)
        [properties] = re.findall(r"```properties\n(name=.*?)```", text, re.S)
        name = plugin.example["name"]
        (tmp_path / f"{name}.properties").write_text(properties)
        (tmp_path / "bridges.yaml").write_text(f"bridges:\n{entry}  - properties: {name}.properties\n"
                                               f"    name: {name}_from_file\n")
        from_yaml, from_file = load_bridges(tmp_path / "bridges.yaml")
        assert from_yaml.connector == from_file.connector == plugin.name
        assert from_yaml.config == from_file.config


def test_common_keys_are_the_fields_of_high_importance():
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig

    common, advanced = (key_table(CloudPubSubSinkConfig, importance=level) for level in ("high", "low"))
    assert "| `cps.topic` |" in common and "| `cps.topic` |" not in advanced
    assert "| `maxBufferSize` |" in advanced and "| `maxBufferSize` |" not in common
    assert len(common.splitlines()) + len(advanced.splitlines()) - 4 == len(CloudPubSubSinkConfig.model_fields)
