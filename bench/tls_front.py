"""A local stand-in for pubsub.googleapis.com:443 in front of pstest, and for a Pub/Sub Lite regional endpoint
(`<region>-pubsublite.googleapis.com:443`) in front of the local Lite server, for the Java reference rows.

The released Java connector always opens TLS to `cps.endpoint` (its Lite connectors to the location's regional
endpoint) with Google credentials and does not read PUBSUB_EMULATOR_HOST. So, without changing it: a throwaway CA
and a certificate for those hosts, a TLS listener (ALPN h2) per host on a loopback address that pipes the
decrypted HTTP/2 bytes to pstest (which speaks h2c and ignores credentials) or, over TLS again, to the Lite
server (which ignores credentials too), and an HTTP token endpoint that answers any service-account token request
with a dummy token. The worker JVM resolves the hosts here (jdk.net.hosts.file) and trusts the CA (a PKCS12 trust
store made with the JDK's keytool).

    python -m bench.tls_front --dir D --upstream 127.0.0.1:PORT --listen 127.0.0.2:443 \
        [--lite-upstream 127.0.0.1:PORT --lite-ca CA.pem --lite-region us-central1 --lite-listen 127.0.0.3:443]
prints `ready <token port>` once every listener is up, and runs until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from local_stack import tls_proxy

PUBSUB_HOST = "pubsub.googleapis.com"
TRUST_STORE_PASSWORD = "changeit"


def lite_host(region: str) -> str:
    """The Lite client libraries' regional endpoint host (com.google.cloud.pubsublite.Endpoints)."""
    return f"{region}-pubsublite.googleapis.com"


def write_credentials(folder: Path, hosts: dict[str, str], token_port: int) -> dict[str, Path]:
    """CA, a server certificate for every host of `hosts` (host -> the loopback address it resolves to), Java trust
    store, hosts file and a service-account key file, in `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(subject: str, key, issuer_name, issuer_key, ca: bool):
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(issuer_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=7))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]),
                                            critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench throwaway CA")])
    ca_cert = certificate("bench throwaway CA", ca_key, ca_name, ca_key, ca=True)
    server_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server_cert = certificate(PUBSUB_HOST, server_key, ca_name, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    paths = {name: folder / name for name in ("ca.pem", "server.pem", "server.key", "trust.p12", "hosts",
                                              "service-account.json")}
    paths["ca.pem"].write_bytes(ca_cert.public_bytes(pem))
    paths["server.pem"].write_bytes(server_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    paths["server.key"].write_bytes(server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    paths["trust.p12"].unlink(missing_ok=True)
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "bench-ca", "-file", str(paths["ca.pem"]),
                    "-keystore", str(paths["trust.p12"]), "-storetype", "PKCS12",
                    "-storepass", TRUST_STORE_PASSWORD], check=True, capture_output=True)
    paths["hosts"].write_text("127.0.0.1 localhost\n" + "".join(f"{ip} {host}\n" for host, ip in hosts.items()))
    account_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    paths["service-account.json"].write_text(json.dumps({
        "type": "service_account", "project_id": "bench", "private_key_id": "bench",
        "private_key": account_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()).decode(),
        "client_email": "bench@bench.iam.gserviceaccount.com", "client_id": "1",
        "token_uri": f"http://127.0.0.1:{token_port}/token",
    }))
    return paths


class _TokenHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"access_token": "bench-token", "expires_in": 3600, "token_type": "Bearer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


async def _serve(fronts: list[tuple[str, str, str | None]], paths: dict[str, Path], token_port: int) -> None:
    servers = [await tls_proxy.start_front(listen, upstream, str(paths["server.pem"]), str(paths["server.key"]), ca)
               for listen, upstream, ca in fronts]
    print(f"ready {token_port}", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--upstream", required=True, help="pstest's host:port")
    parser.add_argument("--listen", default="127.0.0.2:443")
    parser.add_argument("--lite-upstream", help="the Lite server's host:port (TLS)")
    parser.add_argument("--lite-ca", help="the certificate the Lite server's is trusted by")
    parser.add_argument("--lite-region", default="us-central1")
    parser.add_argument("--lite-listen", default="127.0.0.3:443")
    args = parser.parse_args()
    tokens = ThreadingHTTPServer(("127.0.0.1", 0), _TokenHandler)
    threading.Thread(target=tokens.serve_forever, daemon=True).start()
    hosts = {PUBSUB_HOST: args.listen.rsplit(":", 1)[0]}
    fronts: list[tuple[str, str, str | None]] = [(args.listen, args.upstream, None)]
    if args.lite_upstream:
        hosts[lite_host(args.lite_region)] = args.lite_listen.rsplit(":", 1)[0]
        fronts.append((args.lite_listen, args.lite_upstream, args.lite_ca))
    paths = write_credentials(args.dir, hosts, tokens.server_port)
    asyncio.run(_serve(fronts, paths, tokens.server_port))


if __name__ == "__main__":
    main()
