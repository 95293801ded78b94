"""P4Runtime over TLS, as real switches serve it: certificates are made by openssl in the
test; a TLS client is served, a plaintext one is not, and with a client CA a client
without a certificate is refused."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import grpc
import pytest

from p4sim.proto import p4r, p4r_grpc
from p4sim.runtime.dataplane import LocalDataplane
from p4sim.runtime.server import RuntimeServer, TlsConfig

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost and its key."""
    cert, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


def capabilities(channel: grpc.Channel) -> str:
    return p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=5).p4runtime_api_version


def test_tls_server_serves_tls_clients_only(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "switch")
    server = RuntimeServer(LocalDataplane(), "127.0.0.1:0", tls=TlsConfig.from_files(cert, key))
    server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        with grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())) as ch:
            assert capabilities(ch) == "1.5.0"
        with grpc.insecure_channel(address) as ch, pytest.raises(grpc.RpcError) as exc:
            capabilities(ch)
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop(grace=0)


def test_mutual_tls_refuses_clients_without_a_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "switch")
    client_cert, client_key = self_signed(tmp_path, "controller")
    server = RuntimeServer(LocalDataplane(), "127.0.0.1:0", tls=TlsConfig.from_files(cert, key, client_ca=client_cert))
    server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        with_cert = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes(), private_key=client_key.read_bytes(),
                                                 certificate_chain=client_cert.read_bytes())
        with grpc.secure_channel(address, with_cert) as ch:
            assert capabilities(ch) == "1.5.0"
        without = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(address, without) as ch, pytest.raises(grpc.RpcError) as exc:
            capabilities(ch)
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop(grace=0)
