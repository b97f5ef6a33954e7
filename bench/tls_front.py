"""A local stand-in for pubsub.googleapis.com:443 in front of pstest, for the Java reference rows.

The released Java connector always opens TLS to `cps.endpoint` with Google credentials and does not
read PUBSUB_EMULATOR_HOST. So, without changing it: a throwaway CA and a certificate for
pubsub.googleapis.com, a TLS listener (ALPN h2) on a loopback address that pipes the decrypted HTTP/2
bytes to pstest (which speaks h2c and ignores credentials), and an HTTP token endpoint that answers
any service-account token request with a dummy token. The worker JVM resolves the host here
(jdk.net.hosts.file) and trusts the CA (a PKCS12 trust store made with the JDK's keytool).

    python -m bench.tls_front --dir D --upstream 127.0.0.1:PORT --listen 127.0.0.2:443
prints `ready <token port>` once both listeners are up, and runs until killed.
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

from bridgectl import tls_proxy

PUBSUB_HOST = "pubsub.googleapis.com"
TRUST_STORE_PASSWORD = "changeit"


def write_credentials(folder: Path, listen_host: str, token_port: int) -> dict[str, Path]:
    """CA, server certificate, Java trust store, hosts file and a service-account key file, in `folder`."""
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
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
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
    paths["hosts"].write_text(f"127.0.0.1 localhost\n{listen_host} {PUBSUB_HOST}\n")
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


def _serve(listen: str, upstream: str, paths: dict[str, Path], token_port: int) -> None:
    asyncio.run(tls_proxy.serve(listen, upstream, str(paths["server.pem"]), str(paths["server.key"]),
                                on_ready=lambda: print(f"ready {token_port}", flush=True)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--upstream", required=True, help="pstest's host:port")
    parser.add_argument("--listen", default="127.0.0.2:443")
    args = parser.parse_args()
    tokens = ThreadingHTTPServer(("127.0.0.1", 0), _TokenHandler)
    threading.Thread(target=tokens.serve_forever, daemon=True).start()
    paths = write_credentials(args.dir, args.listen.rsplit(":", 1)[0], tokens.server_port)
    _serve(args.listen, args.upstream, paths, tokens.server_port)


if __name__ == "__main__":
    main()
