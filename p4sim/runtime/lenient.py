"""Request decoding that keeps a client's garbage the client's error.

gRPC decodes a request before the method runs; when the bytes are not the message the
method takes, its decoder raises and gRPC answers INTERNAL ("Exception deserializing
request!"), as if the server had failed. Every service of the testbed (P4Runtime,
QueueControl, the agents' ``tccl.Agent``) decodes with `lenient` instead, and a request
that does not decode is answered INVALID_ARGUMENT saying what it is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import grpc
from google.protobuf.message import DecodeError


@dataclass(frozen=True)
class Undecodable:
    """Request bytes that are not the message the method takes."""

    type_name: str
    error: str

    @property
    def message(self) -> str:
        return f"request is not a serialized {self.type_name}: {self.error}"


def lenient(cls: type) -> Callable[[bytes], Any]:
    """A request deserializer for message class ``cls`` that returns `Undecodable`
    instead of raising (nesting past protobuf's recursion limit included)."""
    def decode(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except (DecodeError, RecursionError) as exc:
            return Undecodable(cls.DESCRIPTOR.full_name, str(exc) or type(exc).__name__)

    return decode


def unary_handler(method: Callable[[Any, grpc.ServicerContext], Any], request: type,
                  response: type) -> grpc.RpcMethodHandler:
    """A unary-unary handler of ``method`` whose undecodable requests get
    INVALID_ARGUMENT before ``method`` is called."""
    def run(req: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(req, Undecodable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, req.message)
        return method(req, context)

    return grpc.unary_unary_rpc_method_handler(run, request_deserializer=lenient(request),
                                               response_serializer=response.SerializeToString)
