"""Shared fixtures: the local stack and Spark start once per test session."""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def stack(request):
    """Kafka, the Pub/Sub emulator, the Lite server, moto and Spark Connect on free loopback ports,
    for the whole session."""
    from local_stack.stack import LocalStack
    from local_stack.paths import PROJECT_ROOT

    # A fixed folder, so servers left by a session that crashed are found and stopped here; one per pytest-xdist
    # worker (each worker's tests run on a stack of their own).
    worker = getattr(request.config, "workerinput", {}).get("workerid")
    home = PROJECT_ROOT / ".local" / ("test-stack" + (f"-{worker}" if worker else ""))
    LocalStack(home=home).down(log=lambda line: None)
    shutil.rmtree(home, ignore_errors=True)
    local_stack = LocalStack(home=home, pick_free_ports=True)
    local_stack.up(log=lambda line: None)
    # In-process runs use the classic session of the `spark` fixture; the warm engine (Spark Connect)
    # is used by runs in their own processes (see `spark_remote`), as Dagster runs are.
    env = {k: v for k, v in local_stack.env().items() if k not in ("DAGSTER_HOME", "BRIDGE_SPARK_REMOTE")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield local_stack
    gc.collect()  # drop Kafka clients the tests left behind before their broker goes away
    local_stack.down(log=lambda line: None)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def spark_remote(stack) -> str:
    """The URL of the stack's Spark Connect server (the warm engine)."""
    return stack.env()["BRIDGE_SPARK_REMOTE"]


@pytest.fixture(scope="session")
def spark_cluster(stack) -> dict[str, str]:
    """A Spark standalone cluster (master, two workers) and a Spark Connect server on it behind TLS and
    a token, started on first use; the environment of runs on it, as `bridgectl local env --cluster`."""
    from local_stack.stack import CLUSTER_SERVICES

    stack.up(log=lambda line: None, only=CLUSTER_SERVICES)
    return stack.cluster_env()


@pytest.fixture(scope="session")
def spark(stack):
    from pyspark.errors import PySparkRuntimeError

    from resources.spark import SparkResource

    try:
        return SparkResource().session()
    except PySparkRuntimeError as exc:
        # Seen once in CI (JAVA_GATEWAY_EXITED on one worker, every later test of it erred): say what the machine had.
        raise RuntimeError(f"the classic Spark session did not start: {exc}; {_machine_state()}") from exc


def _machine_state() -> str:
    import tempfile

    available = next((line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemAvailable:")), "?")
    free_tmp = shutil.disk_usage(tempfile.gettempdir()).free
    return f"memory available {int(available) // 1024 if available != '?' else '?'} MiB, " \
           f"{free_tmp // 2**20} MiB free in {tempfile.gettempdir()}, load {os.getloadavg()[0]:.1f}"


def pytest_collection_modifyitems(items):
    """The slowest files first: the fault suite (minutes a file), then the other end-to-end tests, then the rest.
    Under pytest-xdist (`--dist loadfile --no-loadscope-reorder`, scripts/test) each worker takes the next file when
    it is free, so the last files handed out are short ones and the two workers end close together; xdist's own
    order (most tests first) handed out the exactly-once fault files, three tests of two minutes each, last."""
    def rank(item) -> int:
        return 0 if item.get_closest_marker("faults") else 1 if item.get_closest_marker("e2e") else 2

    items.sort(key=rank)  # stable: within a rank, the collection's order


# The fault-injection tests' counts (marker `faults`): each test's row travels in its report's user_properties, so
# that under pytest-xdist the rows of every worker reach the table the main process prints and writes.
_FAULT_ROWS: list[dict] = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _FAULT_ROWS.extend(value for name, value in report.user_properties if name == "fault_row")


def pytest_terminal_summary(terminalreporter):
    if not _FAULT_ROWS:
        return
    from local_stack.paths import PROJECT_ROOT

    lines = ["| fault | connector | produced | delivered | duplicated | lost | time to recover (s) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in _FAULT_ROWS:
        recover = "-" if r["recover_s"] is None else f"{r['recover_s']}"
        lines.append(f"| {r['fault']} | {r['connector']} | {r['produced']} | {r['delivered']} | {r['duplicated']} "
                     f"| {r['lost']} | {recover} |")
    table = "\n".join(lines) + "\n"
    (PROJECT_ROOT / ".local").mkdir(exist_ok=True)
    (PROJECT_ROOT / ".local" / "fault-report.md").write_text(table)
    terminalreporter.write_sep("-", "fault-injection counts (.local/fault-report.md)")
    terminalreporter.write(table)


@pytest.fixture
def unique():
    """A short unique suffix so tests never share topics or subscriptions."""
    return uuid.uuid4().hex[:8]


# The fault-injection suite (tests marked `faults`): each test injects a fault into real servers and counts every
# record in a row of the session's report (produced, delivered, duplicated, lost, time to recover), printed at the end
# of the run and written to .local/fault-report.md for docs/reliability.md (pytest_terminal_summary above).
@dataclass(frozen=True)
class FaultRow:
    fault: str
    connector: str
    produced: int
    delivered: int
    duplicated: int
    lost: int
    recover_s: float | None


class FaultReport:
    def __init__(self, node: pytest.Item):
        self._node = node

    def count(self, fault: str, connector: str, produced: set, delivered: list,
              recover_s: float | None = None) -> FaultRow:
        """Counts from unique record ids: delivered holds every copy that arrived."""
        copies = Counter(delivered)
        row = FaultRow(fault, connector, len(produced), len(delivered),
                       duplicated=sum(n - 1 for n in copies.values()), lost=len(produced - set(copies)),
                       recover_s=None if recover_s is None else round(recover_s, 1))
        self._node.user_properties.append(("fault_row", dataclasses.asdict(row)))  # the table: tests/conftest.py
        return row


@pytest.fixture
def fault_report(request) -> FaultReport:
    return FaultReport(request.node)
