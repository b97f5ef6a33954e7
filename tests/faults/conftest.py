"""The fault-injection suite: each test injects a fault into real servers and counts every record.

Each test adds a row (produced, delivered, duplicated, lost, time to recover) to the session's report, printed at
the end of the run and written to .local/fault-report.md for the README's table (by tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

import pytest

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
