"""Kafka Connect's config providers in bridges files: env, file and directory references, and the errors
that name the key and where it was looked for, never the value."""

from __future__ import annotations

import textwrap

import pytest

from connectors.bridges_file import BridgeConfigError, load_bridges


def bridges_file(tmp_path, credentials: str):
    path = tmp_path / "bridges.yaml"
    path.write_text(textwrap.dedent(f"""\
        bridges:
          - name: b
            connector: CloudPubSubSinkConnector
            config:
              topics: t
              cps.project: ${{file:{tmp_path}/gcp.properties:project}}
              cps.topic: t
              gcp.credentials.json: '{credentials}'
        """))
    return path


def test_file_and_directory_references_are_resolved(tmp_path):
    (tmp_path / "gcp.properties").write_text("project = from-a-file\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "creds").write_text('{"type": "service_account"}')
    [bridge] = load_bridges(bridges_file(tmp_path, f"${{directory:{tmp_path}/secrets:creds}}"))
    assert bridge.config.cps_project == "from-a-file"  # a plain key: resolved when the file loads
    assert bridge.with_secrets().config.gcp_credentials_json.get_secret_value() == '{"type": "service_account"}'


@pytest.mark.parametrize("reference, problem", [
    ("${directory:/no/such/dir:creds}", "key 'gcp.credentials.json': cannot read /no/such/dir/creds"),
    ("${directory:/etc:../etc/passwd}", "key 'gcp.credentials.json': '../etc/passwd' is not a file name"),
    ("${vault:secret/data/gcp:creds}", "key 'gcp.credentials.json': unknown config provider 'vault' (installed: "
                                       "directory, env, file)"),
])
def test_a_reference_that_cannot_be_resolved_is_named(tmp_path, reference, problem):
    (tmp_path / "gcp.properties").write_text("project = p\n")
    if "vault" in reference:  # an unknown provider is told when the file loads
        with pytest.raises(BridgeConfigError) as error:
            load_bridges(bridges_file(tmp_path, reference))
    else:  # a secret that cannot be read, where it is used
        [bridge] = load_bridges(bridges_file(tmp_path, reference))
        with pytest.raises(ValueError) as error:
            bridge.with_secrets()
    assert problem in str(error.value)


def test_a_missing_key_in_a_properties_file_names_the_file(tmp_path):
    (tmp_path / "gcp.properties").write_text("other = secret-value\n")
    with pytest.raises(BridgeConfigError, match="gcp.properties has no key project") as error:
        load_bridges(bridges_file(tmp_path, "${env:HOME}"))
    assert "secret-value" not in str(error.value)
