"""The local stack's self-signed certificate (the Lite server's, the TLS fronts', Kafka's SSL listener's) and a
client certificate it signs (for Kafka's SSL listener, which asks for one).

The Lite client library always dials TLS; trusting this certificate through
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH lets the unmodified client reach loopback.
"""

from __future__ import annotations

import datetime
from pathlib import Path


def ensure_certificate(directory: Path) -> tuple[Path, Path]:
    """(certificate, key) PEM files for localhost and 127.0.0.1, created once and reused."""
    cert_path, key_path = directory / "lite-server.crt", directory / "lite-server.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = _common_name("localhost")
    cert = (
        _valid_ten_years(name, name, key.public_key())
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return _write_pair(cert_path, key_path, cert, key)


def ensure_client_certificate(directory: Path, ca_cert: Path, ca_key: Path) -> tuple[Path, Path]:
    """(certificate, key) PEM files of a client ("bridge") signed by `ca_cert`, for a server that asks for client
    certificates (the local Kafka's SSL listener); created once and reused."""
    cert_path, key_path = directory / "client.crt", directory / "client.key"
    if key_path.exists() and cert_path.exists() and cert_path.stat().st_mtime >= ca_cert.stat().st_mtime:
        return cert_path, key_path  # signed by this CA
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    issuer = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _valid_ten_years(_common_name("bridge"), issuer.subject, key.public_key()).sign(signer, hashes.SHA256())
    return _write_pair(cert_path, key_path, cert, key)


def _common_name(name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def _valid_ten_years(subject, issuer, public_key):
    """A certificate builder for `subject`, issued by `issuer`, valid from yesterday for ten years."""
    from cryptography import x509

    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=3650)))


def _write_pair(cert_path: Path, key_path: Path, cert, key) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization

    cert_path.parent.mkdir(parents=True, exist_ok=True)
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path
