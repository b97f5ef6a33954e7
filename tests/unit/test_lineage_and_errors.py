"""Pure logic of what the UI shows: the lineage endpoints and the one-line cause of a failure."""

from __future__ import annotations

import time

from dagster import AssetKey

from bridge_assets.lineage import BridgeEnds, external_specs
from connectors.endpoints import kafka_topic, pubsub_subscription, pubsub_topic
from connectors.errors import BatchError, root_cause

SPARK_TEXT = """[PYTHON_EXCEPTION] An exception was thrown from the Python worker. Please see the stack trace below.
org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times
Traceback (most recent call last):
  File "/work/connectors/cloud_pubsub/clients.py", line 40, in _credentials
    return google.auth.load_credentials_from_file(self.credentials_file, scopes=[PUBSUB_SCOPE])[0]
google.auth.exceptions.DefaultCredentialsError: File /keys/k.json was not found.

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
Caused by: java.lang.RuntimeException: something else
"""


class FakeSparkError(Exception):
    pass


def test_the_cause_inside_sparks_text_is_the_tasks_python_exception():
    try:
        try:
            raise ValueError("inner")
        except ValueError:
            raise FakeSparkError(SPARK_TEXT)
    except FakeSparkError as exc:
        # The innermost exception of the chain is the ValueError; Spark's own text is on the outer one.
        assert root_cause(exc) == (None, "ValueError: inner")
    assert root_cause(FakeSparkError(SPARK_TEXT)) == (
        "GCP credentials", "DefaultCredentialsError: File /keys/k.json was not found.")


def test_a_batch_error_is_its_own_line_and_a_plain_error_names_its_class():
    assert root_cause(BatchError("Kafka 127.0.0.1:1 did not answer")) == (None, "Kafka 127.0.0.1:1 did not answer")
    assert root_cause(RuntimeError("boom\nmore")) == (None, "RuntimeError: boom")


def test_a_subscription_is_drawn_after_its_topic_and_a_target_after_its_bridge():
    ends = [
        BridgeEnds(AssetKey("to_pubsub"), "orders", (kafka_topic("orders"),), (pubsub_topic("p", "orders"),)),
        BridgeEnds(AssetKey("back"), "orders",
                   (pubsub_subscription("p", "orders-sub", lambda: "projects/p/topics/orders"),),
                   (kafka_topic("orders.mirror"),)),
    ]
    specs = {spec.key.to_user_string(): spec for spec in external_specs(ends)}
    assert set(specs) == {"kafka/orders", "pubsub/p/topics/orders", "pubsub/p/subscriptions/orders-sub",
                          "kafka/orders.mirror"}
    assert [d.asset_key for d in specs["pubsub/p/topics/orders"].deps] == [AssetKey("to_pubsub")]
    assert [d.asset_key for d in specs["pubsub/p/subscriptions/orders-sub"].deps] == [
        AssetKey(["pubsub", "p", "topics", "orders"])]
    assert [d.asset_key for d in specs["kafka/orders.mirror"].deps] == [AssetKey("back")]
    assert {spec.group_name for spec in specs.values()} == {"orders"}
    assert specs["pubsub/p/topics/orders"].kinds == {"pubsub"}


def test_a_subscription_whose_topic_cannot_be_asked_is_drawn_alone(monkeypatch):
    import bridge_assets.lineage as lineage

    monkeypatch.setattr(lineage, "LOOKUP_DEADLINE_S", 0.2)

    def unreachable():
        raise ConnectionError("no answer")

    ends = [BridgeEnds(AssetKey("a"), "g", (pubsub_subscription("p", "s1", unreachable),), ()),
            BridgeEnds(AssetKey("b"), "g", (pubsub_subscription("p", "s2", lambda: time.sleep(5)),), ())]
    started = time.monotonic()
    specs = {spec.key.to_user_string(): spec for spec in external_specs(ends)}
    assert time.monotonic() - started < 2
    assert set(specs) == {"pubsub/p/subscriptions/s1", "pubsub/p/subscriptions/s2"}
    assert all(not spec.deps for spec in specs.values())


def test_a_poison_record_is_told_apart_inside_sparks_error_text():
    """A task's RecordError reaches the driver as text in Spark's error; the always-on streams do not start again
    for it (it would fail on the same record), and do for any other failure."""
    from connectors.errors import is_record_refused

    def spark_error(last_line: str) -> Exception:
        try:
            raise RuntimeError(f"Job aborted due to stage failure: ...\nTraceback (most recent call last):\n"
                               f"  File \"worker.py\", line 1, in main\n{last_line}\n")
        except RuntimeError as inner:
            try:
                raise Exception("SparkConnectGrpcException") from inner
            except Exception as outer:  # noqa: BLE001
                return outer

    poison = spark_error("connectors.errors.RecordError: topic t partition 0 offset 10: the target Kafka "
                         "refused it: Broker: Message size too large")
    assert is_record_refused(poison)
    assert not is_record_refused(spark_error("connectors.outage.Unreachable: Kafka at k:9092 did not answer"))
    assert not is_record_refused(spark_error("ValueError: a bug"))
