"""Certificates for the local control plane: one CA, a serving cert, client certs per identity.

Everything is made with ``cryptography`` into the plane's state directory; nothing leaves the
machine. Client identities follow Kubernetes' x509 rules: CN is the user, O the groups.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from infercrane.local import private

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey, path: Path) -> None:
    private.write(
        path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


class CA:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, directory: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self.dir = directory
        self.cert_path = directory / "ca.crt"
        self._key, self._cert = key, cert

    @classmethod
    def load_or_create(cls, directory: Path) -> CA:
        """The CA in ``directory`` (0700); made (key 0600 from its first byte) when absent."""
        private.directory(directory)
        cert_path, key_path = directory / "ca.crt", directory / "ca.key"
        if cert_path.is_file() and key_path.is_file():
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            return cls(directory, key, x509.load_pem_x509_certificate(cert_path.read_bytes()))
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        name = _name("infercrane-local-ca")
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256())
        )
        _write_key(key, key_path)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cls(directory, key, cert)

    def issue(
        self,
        stem: str,
        cn: str,
        *,
        orgs: tuple[str, ...] = (),
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        server: bool = False,
        peer: bool = False,
    ) -> Issued:
        """A certificate for a client (``cn`` the user, ``orgs`` its groups), a server (``server``),
        or both (``peer``: an etcd member serves clients and dials its peers with one)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server or peer else []
        usage += [ExtendedKeyUsageOID.CLIENT_AUTH] if peer or not server else []
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        )
        if dns or ips:
            sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
            sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        issued = Issued(self.dir / f"{stem}.crt", self.dir / f"{stem}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, issued.key)
        return issued


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """The RSA key pair that signs and verifies service-account tokens."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv, pub = directory / "sa.key", directory / "sa.pub"
    _write_key(key, priv)
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return priv, pub
