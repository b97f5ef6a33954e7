"""A TLS front (ALPN h2) that pipes the decrypted bytes to a plaintext gRPC server on loopback.

Spark Connect's server authenticates a bearer token but does not terminate TLS itself; deployments
put a proxy in front of it. The local cluster does the same with this, so the remote path a user
runs (`sc://host:port/;use_ssl=true` plus a token) is exercised for real. The bench uses it in
front of pstest for the Java reference.

    python -m local_stack.tls_proxy --cert C --key K --listen 127.0.0.1:P --upstream 127.0.0.1:Q
prints `ready` once it listens, and runs until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
from typing import Callable


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


async def start_front(listen: str, upstream: str, cert_file: str, key_file: str,
                      upstream_ca: str | None = None) -> asyncio.Server:
    """A listening TLS front (ALPN h2) piping to `upstream`: plaintext, or TLS trusting `upstream_ca` (a gRPC server
    that only speaks TLS, as the local Lite server)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    context.set_alpn_protocols(["h2"])
    up_host, up_port = upstream.rsplit(":", 1)
    up_tls = None
    if upstream_ca is not None:
        up_tls = ssl.create_default_context(cafile=upstream_ca)
        up_tls.set_alpn_protocols(["h2"])

    async def connection(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(
                up_host, int(up_port), ssl=up_tls, server_hostname=up_host if up_tls else None)
        except (OSError, ssl.SSLError):
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))

    host, port = listen.rsplit(":", 1)
    return await asyncio.start_server(connection, host, int(port), ssl=context)


async def serve(listen: str, upstream: str, cert_file: str, key_file: str,
                on_ready: Callable[[], None] = lambda: print("ready", flush=True)) -> None:
    server = await start_front(listen, upstream, cert_file, key_file)
    on_ready()
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cert", required=True, help="PEM certificate chain")
    parser.add_argument("--key", required=True, help="PEM private key")
    parser.add_argument("--listen", required=True, help="host:port to accept TLS on")
    parser.add_argument("--upstream", required=True, help="host:port of the plaintext server")
    args = parser.parse_args()
    asyncio.run(serve(args.listen, args.upstream, args.cert, args.key))


if __name__ == "__main__":
    main()
