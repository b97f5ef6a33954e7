"""What `bridgectl bridges status/stats` shows of a failed run's error (pure logic)."""

from __future__ import annotations

from dagster._utils.error import SerializableErrorInfo

from bridgectl.bridge_stats import _innermost
from bridgectl.bridges_cli import _error_cell


def test_a_wrapped_step_error_is_shown_by_its_cause():
    cause = SerializableErrorInfo("KafkaException: Broker: Not coordinator\n", [], "KafkaException")
    wrapped = SerializableErrorInfo('DagsterExecutionStepExecutionError: Error occurred while executing op "b":\n',
                                    [], "DagsterExecutionStepExecutionError", cause=cause)
    assert _innermost(wrapped) == "KafkaException: Broker: Not coordinator"


def test_a_long_error_is_cut_in_the_table_only():
    cell = _error_cell({"at": None, "message": "x" * 200}, width=40)
    assert len(cell) == 40 and cell.endswith("…") and _error_cell(None) == "-"
