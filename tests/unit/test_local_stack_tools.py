import json
import os
import time

import pytest

from local_stack import fetch
from local_stack.stack import SERVICES, LocalStack
from connectors.processes import process_start_ticks


def test_a_missing_tool_is_one_line_naming_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(fetch.MissingToolError) as err:
        fetch.require_tool("mvn", "Apache Maven, to fetch jars from Maven Central")
    assert str(err.value) == "`mvn` not found on PATH: install it (Apache Maven, to fetch jars from Maven Central)."


def test_ports_are_chosen_once_and_kept_and_an_override_always_wins(tmp_path, monkeypatch):
    stack = LocalStack(home=tmp_path)
    assert stack.ports()["kafka"] == 19092  # chosen (the default) and kept in stack.json
    monkeypatch.setenv("BRIDGE_KAFKA_PORT", "29092")
    assert LocalStack(home=tmp_path).ports()["kafka"] == 29092  # nothing runs there: the override wins
    monkeypatch.delenv("BRIDGE_KAFKA_PORT")
    assert LocalStack(home=tmp_path).ports()["kafka"] == 29092  # and is kept
    assert stack.env()["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:29092"
    assert [s.running for s in stack.status()] == [False] * len(SERVICES)


def test_ports_picked_for_a_stack_differ_and_stay_out_of_the_defaults_and_the_ephemeral_range(tmp_path, monkeypatch):
    """Each candidate comes up twice (a random pick may repeat) and every third is taken: the stack's ports still
    differ, were free, and lie between the defaults and the kernel's ephemeral range, where no outbound connection
    takes a kept port while its server is down."""
    from local_stack import stack as local_stack

    candidates = iter(port for port in range(21000, 22000) for _ in range(2))
    taken = set(range(21000, 22000, 3))
    bound: list[int] = []

    class _Socket:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def bind(self, address):
            if address[1] in taken:
                raise OSError("Address already in use")
            bound.append(address[1])

    monkeypatch.setattr(local_stack.socket, "socket", _Socket)
    monkeypatch.setattr(local_stack.random, "randrange", lambda low, high: next(candidates))
    ports = LocalStack(home=tmp_path, pick_free_ports=True).ports()
    assert len(set(ports.values())) == len(ports)
    assert not set(ports.values()) & taken and set(ports.values()) <= set(bound)
    assert not set(ports.values()) & set(local_stack.DEFAULT_PORTS.values())
    assert max(local_stack.DEFAULT_PORTS.values()) < local_stack._KEPT_PORTS_FROM <= min(ports.values())
    assert max(ports.values()) < local_stack._ephemeral_low()


def test_a_real_pick_lies_below_the_ephemeral_range(tmp_path):
    ports = LocalStack(home=tmp_path, pick_free_ports=True).ports()
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    assert all(20000 <= port < low for port in ports.values()), ports


def test_an_override_that_cannot_win_yet_says_what_to_do(tmp_path, monkeypatch):
    stack = LocalStack(home=tmp_path)
    stack.ports()
    state = json.loads(stack.state_file.read_text())
    state["pids"] = {"kafka": {"pid": os.getpid(), "start_ticks": process_start_ticks(os.getpid())}}  # "running"
    stack.state_file.write_text(json.dumps(state))
    monkeypatch.setenv("BRIDGE_KAFKA_PORT", "29092")
    with pytest.raises(RuntimeError) as err:
        stack.ports()
    assert str(err.value) == ("BRIDGE_KAFKA_PORT=29092, but kafka is running on port 19092: stop the stack "
                              "(bridgectl local down) and start it again to move it, or unset the variable")
    monkeypatch.delenv("BRIDGE_KAFKA_PORT")
    monkeypatch.setenv("BRIDGE_KAFKA_CONTROLLER_PORT", "29093")
    with pytest.raises(RuntimeError, match="but kafka is running on port 19093"):
        stack.ports()
    stack.state_file.write_text(json.dumps({**state, "pids": {}}))
    (tmp_path / "kafka-data").mkdir()
    (tmp_path / "kafka-data" / "meta.properties").write_text("")
    with pytest.raises(RuntimeError, match="names controller port 19093: remove that directory"):
        stack.ports()
    monkeypatch.setenv("BRIDGE_KAFKA_CONTROLLER_PORT", "http")
    with pytest.raises(RuntimeError, match=r"BRIDGE_KAFKA_CONTROLLER_PORT='http' is not a port number"):
        stack.ports()


def test_a_service_added_since_the_first_up_gets_a_port(tmp_path):
    stack = LocalStack(home=tmp_path, pick_free_ports=True)
    ports = stack.ports()
    state = stack._load_state()
    del state["ports"]["pubsublite"]
    stack._save_state(state)
    again = LocalStack(home=tmp_path, pick_free_ports=True).ports()
    assert again["kafka"] == ports["kafka"] and again["pubsublite"] > 0


def test_a_first_run_step_says_what_it_does_while_it_does_it(monkeypatch, capsys):
    monkeypatch.setattr(fetch, "PROGRESS_EVERY_S", 0.05)
    with fetch.first_run_step("fetching the broker's jars from Maven Central"):
        time.sleep(0.18)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "fetching the broker's jars from Maven Central (first run only) ..."
    assert lines[1].startswith("  ... still fetching the broker's jars from Maven Central: ")
    assert lines[-1].startswith("  done fetching the broker's jars from Maven Central in ")


def test_two_processes_fetch_into_the_cache_one_at_a_time_and_a_fetch_may_call_another(tmp_path):
    """The suite's two workers on a fresh clone both start a stack: their fetches must not write one folder at once."""
    import subprocess
    import sys
    import textwrap

    program = textwrap.dedent("""
        import time
        from local_stack.fetch import one_fetch_at_a_time

        @one_fetch_at_a_time
        def inner():
            return time.time()

        @one_fetch_at_a_time
        def outer():
            started = time.time()
            time.sleep(0.5)
            inner()  # taken over, not waited for: no deadlock
            print(started, time.time())
        outer()
    """)
    env = {**os.environ, "BRIDGE_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.Popen([sys.executable, "-c", program], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    spans = sorted(tuple(map(float, run.communicate(timeout=30)[0].split())) for run in runs)
    assert all(run.returncode == 0 for run in runs)
    assert spans[0][1] <= spans[1][0]  # the second began after the first had ended


def test_a_picked_port_is_never_one_a_sibling_stack_keeps(tmp_path, monkeypatch):
    """Two stacks side by side (the suite's two workers) pick at random from one range: the second avoids what the
    first keeps, though none of it is bound yet."""
    from local_stack import stack as local_stack

    first = LocalStack(home=tmp_path / "test-stack-gw0", pick_free_ports=True).ports()
    again = iter([*first.values(), *range(21000, 22000)])  # the second stack is offered the first's ports first
    monkeypatch.setattr(local_stack.random, "randrange", lambda low, high: next(again))
    second = LocalStack(home=tmp_path / "test-stack-gw1", pick_free_ports=True).ports()
    assert not set(first.values()) & set(second.values())
    assert len(set(second.values())) == len(second)


def test_stacks_beside_each_other_pick_their_ports_one_at_a_time(tmp_path):
    """A stack picking its ports while a sibling is picking waits for it, then keeps clear of the sibling's (two of
    the suite's workers once picked the same port, each before the other had saved its own)."""
    import fcntl
    import threading

    first = LocalStack(home=tmp_path / "first", pick_free_ports=True)
    second = LocalStack(home=tmp_path / "second", pick_free_ports=True)
    picked: dict[str, int] = {}
    with open(tmp_path / ".port-picking.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as the first stack's ports() holds it
        waiting = threading.Thread(target=lambda: picked.update(second.ports()))
        waiting.start()
        time.sleep(0.5)
        assert not picked and waiting.is_alive()
        first_ports = first._ports()
        fcntl.flock(lock, fcntl.LOCK_UN)
    waiting.join(10)
    assert len(picked) == len(first_ports) and not set(picked.values()) & set(first_ports.values())
