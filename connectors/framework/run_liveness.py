"""A killed run's batch tasks learn of it at their next look, not at its lease's lapse: while a batch's Spark job runs,
the run listens on a TCP port, and each task holds a connection to it. A process that dies closes its sockets (its
kernel sends the peer an end of stream), so the task's next look reads end-of-file and the task stops. The run
writes the batch's id first, so a task links only to its own run (not to whatever else answers at that address).
Measured on 2 saturated cores, the lease's lapse (0.7 s without a beat, found up to 0.3 s late) let a killed batch
write on for up to 1.3 s; a closed connection is seen in the time of a `select`.

An always-on stream's tasks hold such a connection for the stream's life (the run listens from the stream's start
to its end, greeting with the stream's id), and the run closes it when it ends the stream: its tasks stop at once
rather than at their next look at the lease. Those connections carry TCP keepalives, so a connection idle for an
hour is not dropped by something between the hosts.

The Kafka lease stays what fences runs and what a task falls back on when a socket cannot tell: a host that
vanished sends nothing, and an executor that cannot reach the run's address (a firewall, another network) has no
connection at all. The address is the one Spark itself would give this process (SPARK_LOCAL_IP, else this host's
name), so executors that reach the driver reach it.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import threading

# A task that cannot reach the run's address waits at most this long, once, before it goes on without the link.
CONNECT_TIMEOUT_S = 0.2
# How long a task waits for the run's first bytes (its accepting thread may be slow to run on saturated cores).
GREETING_TIMEOUT_S = 1.0
# TCP keepalive of a task's connection (where the platform lets it be set): a probe after this long idle, then every
# KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES times.
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES = 60, 10, 3


def run_address() -> str:
    """The address this process is reached at, as Spark chooses its driver's (SPARK_LOCAL_IP, else the host name)."""
    configured = os.environ.get("SPARK_LOCAL_IP")
    if configured:
        return configured
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class RunLiveness:
    """The run's side: a listening socket whose connections are greeted with `token`, then held open, unread, until
    `close`."""

    def __init__(self, token: bytes, host: str | None = None):
        self._token = token
        self._listener = socket.create_server((host or run_address(), 0), backlog=128)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="run liveness", daemon=True).start()

    @classmethod
    def or_none(cls, token: bytes) -> RunLiveness | None:
        """One on this process's address, or None where it cannot listen there (its tasks go by the lease alone)."""
        try:
            return cls(token)
        except OSError as exc:
            logging.getLogger(__name__).warning("no run liveness socket on %s (%s): a killed run's tasks stop at "
                                                "its lease's lapse", run_address(), exc)
            return None

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                if self._closed:
                    connection.close()
                    return
                self._held.append(connection)
            try:
                connection.sendall(self._token)
            except OSError:  # the task went away first
                pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
            held, self._held = self._held, []
        self._listener.close()
        for connection in held:
            connection.close()


class LivenessLink:
    """A task's side: `gone()` is True once the run's end of the connection closed (killed or ended). A task that
    could not connect, or was not greeted with `token`, has no link, and `gone()` stays False (the lease's lapse
    tells instead)."""

    def __init__(self, address: tuple[str, int], token: bytes):
        self._socket: socket.socket | None = None
        try:
            connection = socket.create_connection(address, timeout=CONNECT_TIMEOUT_S)
        except OSError:
            return
        try:
            connection.settimeout(GREETING_TIMEOUT_S)
            greeting = b""
            while len(greeting) < len(token):
                part = connection.recv(len(token) - len(greeting))
                if not part:
                    break
                greeting += part
        except OSError:
            greeting = b""
        if greeting != token:
            connection.close()
            return
        connection.settimeout(None)
        _keep_alive(connection)
        self._socket = connection

    @property
    def linked(self) -> bool:
        """Whether the task holds a connection to its live run (False: it goes by the lease alone)."""
        return self._socket is not None

    def gone(self) -> bool:
        if self._socket is None:
            return False
        readable, _, _ = select.select([self._socket], [], [], 0)
        if not readable:
            return False
        try:
            return self._socket.recv(1) == b""  # the run writes nothing after its greeting
        except OSError:  # reset
            return True

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def link_to(address: tuple[str, int] | None, token: str) -> LivenessLink | None:
    """A task's link to the run listening at `address` with greeting `token`; None where the run has no listener."""
    return LivenessLink(address, token.encode()) if address is not None else None


def _keep_alive(connection: socket.socket) -> None:
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
                          ("TCP_KEEPCNT", KEEPALIVE_PROBES)):
        if hasattr(socket, option):
            connection.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
