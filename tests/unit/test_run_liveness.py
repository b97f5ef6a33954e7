"""A batch task's link to its run's process (connectors/framework/run_liveness.py): open while the run lives, gone at
the task's next look once the run's process ends or is killed, and never gone where no link to its own run could be
made (nothing listening, or something else answering there)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from connectors.framework.run_liveness import CONNECT_TIMEOUT_S, GREETING_TIMEOUT_S, LivenessLink, RunLiveness

TOKEN = b"0123456789abcdef"


def _gone_within(link: LivenessLink, seconds: float) -> bool:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if link.gone():
            return True
        time.sleep(0.001)
    return False


def test_a_link_is_gone_once_the_run_closes_it_and_not_before():
    liveness = RunLiveness(TOKEN, "127.0.0.1")
    links = [LivenessLink(liveness.address, TOKEN) for _ in range(3)]
    time.sleep(0.05)
    assert not any(link.gone() for link in links)
    liveness.close()
    assert all(_gone_within(link, 1.0) for link in links)
    for link in links:
        link.close()


def test_a_link_is_gone_when_the_run_process_is_killed():
    run = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                            "from connectors.framework.run_liveness import RunLiveness\n"
                            f"liveness = RunLiveness({TOKEN!r}, '127.0.0.1')\n"
                            "print(*liveness.address, flush=True)\n"
                            "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    host, port = run.stdout.readline().split()
    link = LivenessLink((host, int(port)), TOKEN)
    time.sleep(0.05)
    assert not link.gone()
    run.kill()
    run.wait()
    assert _gone_within(link, 1.0)  # the kernel closed the dead process's end
    link.close()


def test_without_a_connection_a_link_is_never_gone():
    liveness = RunLiveness(TOKEN, "127.0.0.1")
    address = liveness.address
    liveness.close()  # nothing listens there now: the connection is refused
    started = time.monotonic()
    link = LivenessLink(address, TOKEN)
    assert time.monotonic() - started <= CONNECT_TIMEOUT_S + 0.1
    assert not link.gone()


def test_another_run_or_another_server_at_the_address_gives_no_link():
    other_run = RunLiveness(b"fedcba9876543210", "127.0.0.1")
    link = LivenessLink(other_run.address, TOKEN)
    other_run.close()
    assert not _gone_within(link, 0.2)

    silent = socket.create_server(("127.0.0.1", 0))  # accepts (in the kernel's backlog) and never greets
    started = time.monotonic()
    link = LivenessLink(silent.getsockname()[:2], TOKEN)
    assert time.monotonic() - started >= GREETING_TIMEOUT_S - 0.05
    silent.close()
    assert not _gone_within(link, 0.2)


def test_a_run_that_cannot_listen_at_its_address_goes_by_the_lease_alone(monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "192.0.2.1")  # TEST-NET-1: an address of no interface here
    assert RunLiveness.or_none(TOKEN) is None


def test_an_always_on_stream_listens_for_its_tasks_from_its_start_until_it_is_ended(monkeypatch):
    """LeasedJob: each job started gets a listener greeting with its stream's id; ending the job (a stop, a restart)
    closes it, so the tasks still linked stop at their next look; a new job listens anew."""
    from types import SimpleNamespace

    from connectors.framework.leased_job import LeasedJob
    from connectors.framework.run_liveness import link_to

    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    stream = LeasedJob.__new__(LeasedJob)  # the base's constructor needs a Spark session: only what is used here
    stream._liveness, stream._stopped = None, False
    stream._lease, stream._job = SimpleNamespace(stop=lambda: None), SimpleNamespace(end=lambda wait_s: None)

    first = stream._new_stream_id()
    first_link = link_to(stream.run_address, first)
    assert first_link is not None and not first_link.gone()
    second = stream._new_stream_id()  # started again after a failure: the old job's tasks are told
    assert second != first and _gone_within(first_link, 0.5)
    second_link = link_to(stream.run_address, second)
    assert not second_link.gone()
    stream.stop()
    assert _gone_within(second_link, 0.5) and stream.run_address is None
