"""TLS for `serve --tls`: the user's certificate, or a self-signed one made in the home, and its fingerprint.

The self-signed certificate (ECDSA P-256, valid VALID_DAYS) is made on the first `serve --tls` in
$LOCAL_RAG_HOME/tls/ (the key readable only by its owner) for the names clients may use: localhost, the
loopback addresses, this machine's names and addresses, the bind address and the allowed hosts. It is kept
across restarts (clients pin its SHA-256 fingerprint), and made anew only when it expires within RENEW_DAYS or a
name clients need is missing from it; the server then says that the fingerprint changed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from rag_search.errors import ConfigError

DIR = "tls"
CERT, KEY = "cert.pem", "key.pem"
VALID_DAYS = 825  # the longest a TLS server certificate may be for macOS and iOS to accept it
RENEW_DAYS = 30


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path
    fingerprint: str  # SHA-256 of the DER certificate, AB:CD:... as `openssl x509 -fingerprint -sha256` prints it
    self_signed: bool
    made: bool = False  # made by this start (new, or replacing one that expired or lacked a name)


def certificate(home: Path, names: set[str], cert: str | None = None, key: str | None = None) -> Certificate:
    """The user's certificate and key (both PEM files), else the home's self-signed one for `names`."""
    if cert or key:
        if not (cert and key):
            raise ConfigError("TLS needs both a certificate and its key: pass --tls-cert and --tls-key (or set "
                              "server.tls_cert and server.tls_key), or neither for a self-signed certificate.")
        c, k = Path(cert).expanduser(), Path(key).expanduser()
        for f in (c, k):
            if not f.is_file():
                raise ConfigError(f"TLS file {f} does not exist. Point server.tls_cert/tls_key (or --tls-cert/"
                                  "--tls-key) at PEM files, or leave both unset for a self-signed certificate.")
        return Certificate(c, k, fingerprint(c), self_signed=False)
    folder = home / DIR
    c, k = folder / CERT, folder / KEY
    made = not (c.is_file() and k.is_file() and _still_good(c, names))
    if made:
        _make(folder, c, k, names)
    return Certificate(c, k, fingerprint(c), self_signed=True, made=made)


def fingerprint(cert: Path) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        der = x509.load_pem_x509_certificate(cert.read_bytes()).public_bytes(Encoding.DER)
    except ValueError as exc:
        raise ConfigError(f"{cert} is not a PEM certificate ({exc}).") from exc
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def _still_good(cert: Path, names: set[str]) -> bool:
    from cryptography import x509

    try:
        c = x509.load_pem_x509_certificate(cert.read_bytes())
        san = c.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    have = {str(n).lower() for n in san.get_values_for_type(x509.DNSName)}
    have |= {str(a) for a in san.get_values_for_type(x509.IPAddress)}
    left = c.not_valid_after_utc - dt.datetime.now(dt.timezone.utc)
    return left > dt.timedelta(days=RENEW_DAYS) and {_normal(n) for n in names} <= have


def _make(folder: Path, cert: Path, key: Path, names: set[str]) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "local-rag server"),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "local-rag (self-signed)")])
    now = dt.datetime.now(dt.timezone.utc)
    built = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(private.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
             .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
             .add_extension(x509.SubjectAlternativeName(_alt_names(names)), critical=False)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
             .sign(private, hashes.SHA256()))
    _write(key, private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()), 0o600)
    _write(cert, built.public_bytes(serialization.Encoding.PEM), 0o644)


def _alt_names(names: set[str]) -> list:
    from cryptography import x509

    out = []
    for name in sorted({_normal(n) for n in names}):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def _normal(name: str) -> str:
    n = name.strip().strip("[]").lower()
    try:
        return str(ipaddress.ip_address(n))
    except ValueError:
        return n


def _write(file: Path, data: bytes, mode: int) -> None:
    tmp = file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, file)
