"""The shared publish channel keeps its polling thread: calls one after another start no thread each."""

import threading
from concurrent import futures

import grpc

from connectors.cloud_pubsub.clients import keep_polling_thread

METHOD = "/test.Echo/Echo"


def _echo_server():
    handler = grpc.method_handlers_generic_handler("test.Echo", {
        "Echo": grpc.unary_unary_rpc_method_handler(lambda request, context: request)})
    # One handler thread, started by the first call: a pool of two may start its second during the counted calls.
    server = grpc.server(futures.ThreadPoolExecutor(1), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def _thread_starts_over_calls(channel, calls: int, monkeypatch) -> int:
    started = []
    original = threading.Thread.start

    def counted(thread):
        started.append(thread.name)
        return original(thread)

    call = channel.unary_unary(METHOD)
    call.future(b"warm").result(timeout=10)
    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", counted)
        for i in range(calls):
            assert call.future(str(i).encode()).result(timeout=10) == str(i).encode()
    return len(started)


def test_a_held_channel_starts_no_thread_per_call(monkeypatch):
    server, port = _echo_server()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        assert keep_polling_thread(channel)
        assert _thread_starts_over_calls(channel, 30, monkeypatch) == 0
    finally:
        server.stop(None)
