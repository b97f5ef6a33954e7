"""The fault-injection suite: each test injects a fault into real servers and counts every record.

Each test adds a row (produced, delivered, duplicated, lost, time to recover) to the session's report,
printed at the end of the run and written to .local/fault-report.md for the README's table.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest

from bridgectl.paths import PROJECT_ROOT

_ROWS: list["FaultRow"] = []


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
    def count(self, fault: str, connector: str, produced: set, delivered: list,
              recover_s: float | None = None) -> FaultRow:
        """Counts from unique record ids: delivered holds every copy that arrived."""
        copies = Counter(delivered)
        row = FaultRow(fault, connector, len(produced), len(delivered),
                       duplicated=sum(n - 1 for n in copies.values()), lost=len(produced - set(copies)),
                       recover_s=None if recover_s is None else round(recover_s, 1))
        _ROWS.append(row)
        return row


@pytest.fixture
def fault_report() -> FaultReport:
    return FaultReport()


def _table() -> str:
    lines = ["| fault | connector | produced | delivered | duplicated | lost | time to recover (s) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in _ROWS:
        recover = "-" if r.recover_s is None else f"{r.recover_s}"
        lines.append(f"| {r.fault} | {r.connector} | {r.produced} | {r.delivered} | {r.duplicated} | {r.lost} "
                     f"| {recover} |")
    return "\n".join(lines) + "\n"


def pytest_terminal_summary(terminalreporter):
    if not _ROWS:
        return
    (PROJECT_ROOT / ".local").mkdir(exist_ok=True)
    (PROJECT_ROOT / ".local" / "fault-report.md").write_text(_table())
    terminalreporter.write_sep("-", "fault-injection counts (.local/fault-report.md)")
    terminalreporter.write(_table())
