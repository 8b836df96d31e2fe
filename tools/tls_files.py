"""Certificates for the TLS tests, made with the openssl command (Debian's, on every
machine of ours): a CA, a server certificate for 127.0.0.1 and localhost, client
certificates from that CA and from another, and an expired one."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=directory)


def _signed(directory: Path, name: str, ca: str, days: int, san: str | None = None) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", f"/CN={name}", cwd=directory)
    extension = []
    if san is not None:
        (directory / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        extension = ["-extfile", f"{name}.ext"]
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", str(days), "-out", f"{name}.pem", *extension,
             cwd=directory)


@dataclass(frozen=True)
class TlsFiles:
    directory: Path

    def pem(self, name: str) -> str:
        return str(self.directory / f"{name}.pem")

    def key(self, name: str) -> str:
        return str(self.directory / f"{name}.key")


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _signed(directory, "server", "ca", 2, "IP:127.0.0.1,DNS:localhost")
    _signed(directory, "client", "ca", 2)
    _signed(directory, "stranger", "other-ca", 2)
    _signed(directory, "expired", "ca", 0)  # not after = now: expired a second later
    time.sleep(1.1)
    return TlsFiles(directory)
