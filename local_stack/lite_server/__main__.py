"""python -m local_stack.lite_server --port N --data DIR: serve Pub/Sub Lite over TLS on 127.0.0.1."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

import grpc

from local_stack.lite_server.service import all_handlers
from local_stack.lite_server.store import LiteStore, retention_loop
from local_stack.lite_server.tls import ensure_certificate


async def serve(port: int, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    store = LiteStore(data_dir / "lite.sqlite")
    cert, key = ensure_certificate(data_dir)
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)])
    server.add_generic_rpc_handlers(all_handlers(store))
    server.add_secure_port(f"127.0.0.1:{port}",
                           grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())]))
    await server.start()
    logging.info("Pub/Sub Lite server on 127.0.0.1:%d, data in %s", port, data_dir)
    retention = asyncio.create_task(retention_loop(store))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    retention.cancel()
    await server.stop(grace=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(serve(args.port, args.data))


if __name__ == "__main__":
    main()
