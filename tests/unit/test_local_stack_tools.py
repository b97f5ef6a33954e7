import pytest

from bridgectl import fetch
from bridgectl.local_stack import LocalStack


def test_a_missing_tool_is_one_line_naming_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(fetch.MissingToolError) as err:
        fetch.require_tool("mvn", "Apache Maven, to fetch jars from Maven Central")
    assert str(err.value) == "`mvn` not found on PATH: install it (Apache Maven, to fetch jars from Maven Central)."


def test_ports_are_chosen_once_and_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("BRIDGE_KAFKA_PORT", "29092")
    stack = LocalStack(home=tmp_path)
    assert stack.ports()["kafka"] == 29092
    monkeypatch.setenv("BRIDGE_KAFKA_PORT", "39092")
    assert LocalStack(home=tmp_path).ports()["kafka"] == 29092  # Kafka's metadata log remembers its ports
    assert stack.env()["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:29092"
    assert [s.running for s in stack.status()] == [False] * 5


def test_a_service_added_since_the_first_up_gets_a_port(tmp_path):
    stack = LocalStack(home=tmp_path, pick_free_ports=True)
    ports = stack.ports()
    state = stack._load_state()
    del state["ports"]["pubsublite"]
    stack._save_state(state)
    again = LocalStack(home=tmp_path, pick_free_ports=True).ports()
    assert again["kafka"] == ports["kafka"] and again["pubsublite"] > 0
