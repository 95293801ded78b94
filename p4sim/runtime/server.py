"""Start and stop a P4Runtime gRPC server for one device.

    server = RuntimeServer(device, "127.0.0.1:9559", device_id=1, queue_control=device)
    server.start()          # returns once listening; server.port is the bound port
    ...
    server.stop()

9559 is the IANA port for P4Runtime (and simple_switch_grpc's default); an address
ending in ``:0`` binds a free port (tests). The default host is loopback, not
simple_switch_grpc's 0.0.0.0: a testbed switch is programmed from the same machine, and
a server on every interface would take writes from anyone who can reach it (give
``0.0.0.0:9559`` to serve a remote controller). The queue-control service (queues.py) is
served on the same address when a `QueueControl` is given. Real switches serve
P4Runtime over TLS; ``tls=TlsConfig.from_files(cert, key)`` does the same (with
``client_ca``, clients must present a certificate that CA signed).
"""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from p4sim.runtime import queues
from p4sim.runtime.dataplane import Dataplane
from p4sim.runtime.service import MAX_STREAMS, P4RuntimeService, rpc_handler

DEFAULT_ADDRESS = "127.0.0.1:9559"
# Every StreamChannel holds a worker for its lifetime and the service refuses streams
# beyond MAX_STREAMS, so these workers always remain for Read, Write and the rest.
UNARY_WORKERS = 16
# RPCs waiting for a worker beyond this are refused (RESOURCE_EXHAUSTED) by gRPC itself
# instead of queueing without bound.
MAX_QUEUED_RPCS = 256
# P4Info + BMv2 JSON of a large program exceed gRPC's default 4 MiB message limit.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class TlsConfig:
    """PEM server certificate chain and key; ``client_ca`` turns on mutual TLS."""

    cert_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    @classmethod
    def from_files(cls, cert: str | Path, key: str | Path, client_ca: str | Path | None = None) -> "TlsConfig":
        return cls(Path(cert).read_bytes(), Path(key).read_bytes(),
                   Path(client_ca).read_bytes() if client_ca is not None else None)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.private_key, self.cert_chain)], root_certificates=self.client_ca,
                                           require_client_auth=self.client_ca is not None)


class RuntimeServer:
    """A gRPC server serving `P4RuntimeService` (and queue control) on ``address``."""

    def __init__(self, dataplane: Dataplane, address: str = DEFAULT_ADDRESS, *, device_id: int = 0,
                 queue_control: queues.QueueControl | None = None, max_streams: int = MAX_STREAMS,
                 tls: TlsConfig | None = None):
        self.address = address
        self.tls = tls
        self.service = P4RuntimeService(dataplane, device_id, max_streams=max_streams)
        self._queue_control = queue_control
        self._server: grpc.Server | None = None
        self.port: int | None = None

    def start(self) -> None:
        """Bind and serve; raise RuntimeError naming the address if it cannot be bound."""
        workers = self.service.max_streams + UNARY_WORKERS
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt"),
            maximum_concurrent_rpcs=workers + MAX_QUEUED_RPCS,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        server.add_generic_rpc_handlers((rpc_handler(self.service),))
        if self._queue_control is not None:
            server.add_generic_rpc_handlers((queues.handler(self._queue_control),))
        try:
            if self.tls is None:
                port = server.add_insecure_port(self.address)
            else:
                port = server.add_secure_port(self.address, self.tls.credentials())
        except RuntimeError as exc:
            raise RuntimeError(f"cannot listen for P4Runtime on {self.address}: {exc}") from None
        if port == 0:
            raise RuntimeError(f"cannot listen for P4Runtime on {self.address}")
        self.port = port
        self.service.start()
        server.start()
        self._server = server

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving: new RPCs are refused at once, open StreamChannels end at once
        with UNAVAILABLE (`P4RuntimeService.end_streams`), unary calls in flight get
        ``grace`` seconds to finish before they are cancelled."""
        if self._server is not None:
            stopped = self._server.stop(grace)   # refuses new RPCs from here on
            self.service.end_streams()
            stopped.wait()
            self._server = None
        self.service.stop()
