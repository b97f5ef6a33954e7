import contextlib
from typing import TYPE_CHECKING, Iterator

from dagster import ConfigurableResource, DagsterInstance, InitResourceContext, get_dagster_logger
from pydantic import Field, PrivateAttr

from connectors.jvm_logging import LOG4J2_CONFIG

if TYPE_CHECKING:  # pyspark is imported by runs, not by the code location's load
    from pyspark.sql import SparkSession


class _InstanceSessionIdStore:
    """The shared Spark Connect session id, kept in the Dagster instance's key-value storage, one per URL."""

    def __init__(self, instance: DagsterInstance, remote: str):
        self._instance = instance
        self._key = f"kafka-pubsub-bridge/spark-connect-session/{remote}"

    def get(self) -> str | None:
        return self._instance.run_storage.get_cursor_values({self._key}).get(self._key)

    def set(self, session_id: str) -> None:
        self._instance.run_storage.set_cursor_values({self._key: session_id})


class SparkResource(ConfigurableResource):
    """The Spark engine the micro-batches run on: a Spark Connect endpoint when `remote` is set
    (warm: nothing starts per run; every run joins one shared server session), else a classic
    session on `master` started by the run."""

    master: str = Field("local[*]", description="Spark master URL for a classic session (BRIDGE_SPARK_MASTER)")
    remote: str | None = Field(None, description="Spark Connect URL, sc://host:port[/;use_ssl=true] "
                                                 "(BRIDGE_SPARK_REMOTE)")
    remote_token: str | None = Field(None, description="bearer token of the Spark Connect server; set it with "
                                                       "EnvVar (BRIDGE_SPARK_REMOTE_TOKEN), it is a secret")
    _instance: DagsterInstance | None = PrivateAttr(None)
    _run_id: str | None = PrivateAttr(None)
    _open: "SparkSession | None" = PrivateAttr(None)  # the session of the batch (or loop) in progress

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._instance = context.instance
        self._run_id = context.run_id

    def _remote_url(self) -> str | None:
        """The URL a client dials: `remote` with the token added. It is a secret; never log or store it."""
        from connectors.spark_session import with_token

        return with_token(self.remote, self.remote_token) if self.remote else None

    def session(self) -> "SparkSession":
        from connectors.spark_session import get_spark_session, shared_connect_session, without_secrets

        if self.remote and self._instance is not None:
            store = _InstanceSessionIdStore(self._instance, without_secrets(self.remote))
            return shared_connect_session(self._remote_url(), store)
        if self.remote:  # outside a Dagster run (bench, tests): a session of this process's own
            return get_spark_session([], remote=self._remote_url())
        return get_spark_session([], master=self.master, log4j2_config=str(LOG4J2_CONFIG))

    def _run_tag(self) -> str:
        return f"dagster-run-{self._run_id or 'none'}"

    @staticmethod
    def _tag_for(spark: "SparkSession", bridge: str) -> None:
        """Interrupts what an earlier run of `bridge` left running, then tags this thread's work with the bridge."""
        bridge_tag = f"bridge-{bridge}"
        leftovers = spark.interruptTag(bridge_tag)
        if leftovers:
            get_dagster_logger().warning(f"Interrupted {len(leftovers)} Spark operations of bridge {bridge} left "
                                         "running by an earlier run")
        spark.addTag(bridge_tag)

    def tag_thread(self, bridge: str) -> None:
        """In a bridge host's thread for `bridge`, inside the host's open session: Spark tags belong to the thread
        that adds them, so each bridge's thread carries the run's tag (the watchdog's) and its own."""
        assert self._open is not None, "tag_thread() is for a thread of a run whose session is open"
        self._open.addTag(self._run_tag())
        self._tag_for(self._open, bridge)

    @contextlib.contextmanager
    def batch_session(self, bridge: str) -> Iterator["SparkSession"]:
        """The session one batch of `bridge` runs in, its Spark work tagged with the bridge and the run.

        Call it holding the bridge's lease: it first interrupts any operation of the bridge still running
        in the shared session (left by a run that died). A batch that ends by an exception -- a run
        terminated from the UI raises one -- interrupts its own operations; a run process that dies is
        covered by a watchdog process (Spark Connect only: a classic session's jobs die with its driver).

        Nested, it yields the session already open: a continuous run opens one around its whole loop, so
        its micro-batches do not each pay for a session check, an interrupt call and a watchdog process.
        """
        from connectors.outage import spark_connect_outages_named, task_errors_named
        from connectors.spark_session import connect_url_of, without_secrets
        from connectors.spark_watchdog import InterruptWatchdog

        if self._open is not None:
            with spark_connect_outages_named(without_secrets(self.remote or self.master)), task_errors_named():
                yield self._open
            return
        # A classic session has no server to lose; only Spark Connect errors are named here.
        with spark_connect_outages_named(without_secrets(self.remote or self.master)):
            spark = self.session()
            run_tag = self._run_tag()
            self._tag_for(spark, bridge)
            spark.addTag(run_tag)
            watchdog = InterruptWatchdog(connect_url_of(self._remote_url(), spark), run_tag) if self.remote else None
            try:
                with task_errors_named():
                    self._open = spark
                    yield spark
            except BaseException:
                with contextlib.suppress(Exception):
                    spark.interruptTag(run_tag)
                raise
            finally:
                self._open = None
                spark.clearTags()
                if watchdog is not None:
                    watchdog.disarm()
