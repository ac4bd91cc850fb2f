"""grpc.health.v1.Health/Check without grpcio-health-checking: the request
and response are one field each, encoded here by hand (no second registration
of health.proto in protobuf's default pool to collide with anyone's)."""

from __future__ import annotations

from typing import Any, Callable

import grpc

_METHOD = "/grpc.health.v1.Health/Check"
# HealthCheckResponse.ServingStatus.
_STATUSES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode_request(service: str) -> bytes:
    """HealthCheckRequest{service}: field 1, length-delimited."""
    data = service.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def decode_response(data: bytes) -> str:
    """HealthCheckResponse.status (field 1, varint) by name; UNKNOWN when absent."""
    i = 0
    status = 0
    while i < len(data):
        tag = data[i]
        i += 1
        wire = tag & 7
        value = 0
        shift = 0
        if wire == 0:
            while True:
                byte = data[i]
                i += 1
                value |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            if tag >> 3 == 1:
                status = value
        elif wire == 2:  # a field from a newer health.proto: skip it
            length = 0
            while True:
                byte = data[i]
                i += 1
                length |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            i += length
        else:
            break
    return _STATUSES.get(status, f"UNKNOWN({status})")


def check_method(channel: grpc.Channel) -> Callable[..., Any]:
    """A callable ``(service, timeout=..., wait_for_ready=...) -> status name``."""
    method = channel.unary_unary(_METHOD, request_serializer=encode_request, response_deserializer=decode_response)

    def check(service: str, *, timeout: float, wait_for_ready: bool = False) -> str:
        return method(service, timeout=timeout, wait_for_ready=wait_for_ready)

    return check
