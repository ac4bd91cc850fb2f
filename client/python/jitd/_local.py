"""The local path (docs/CONTRACT.md, "The local path"): a cached kernel from a
same-host daemon over its Unix socket without gRPC. The client's first
request then costs a connect and one round trip instead of a gRPC channel;
everything else (misses, compiles, admin calls) stays on gRPC.

The framing: the 8 bytes ``jitd/l1\\n`` each way, then one frame out (4-byte
little-endian length, a serialized GetKernelRequest) and one back (a
LocalAnswer) per request, in order.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from typing import Any

from google.protobuf.message import DecodeError

from ._proto.jitd.v1 import compiler_pb2

PREFACE = b"jitd/l1\n"
# A daemon answers its preface and a cache lookup in well under a
# millisecond; one slower than this is asked over gRPC instead.
OPEN_TIMEOUT_S = 0.5
ASK_TIMEOUT_S = 0.5
# After a failed open the path is not tried again for this long.
RETRY_AFTER_S = 2.0
_MAX_ANSWER_BYTES = 512 << 20


class LocalError(Exception):
    """The local path cannot be used now (no daemon, an older one, a broken
    connection): the caller asks over gRPC, which says why if it fails too."""


class LocalChannel:
    """One connection of the local path, for the process that opened it
    (``pid``). Not thread-safe: the client holds it under a lock."""

    def __init__(self, socket_path: str) -> None:
        self.pid = os.getpid()
        self._greeted = False
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(OPEN_TIMEOUT_S)
            self._sock.connect(socket_path)
            # The daemon's preface is read with the first answer: waiting for
            # it here would cost a round trip.
            self._sock.sendall(PREFACE)
        except OSError as e:
            self._sock.close()
            raise LocalError(f"connect to {socket_path}: {e}") from e

    def ask(self, request: Any) -> Any:
        """The LocalAnswer to one GetKernelRequest; LocalError when the
        connection broke, the answer did not come in time or what answers
        does not speak the local path (the channel is then unusable)."""
        payload = request.SerializeToString()
        try:
            self._sock.settimeout(ASK_TIMEOUT_S)
            self._sock.sendall(struct.pack("<I", len(payload)) + payload)
            if not self._greeted:
                if self._receive(len(PREFACE)) != PREFACE:
                    raise LocalError("the daemon does not speak the local path")
                self._greeted = True
            (length,) = struct.unpack("<I", self._receive(4))
            if length > _MAX_ANSWER_BYTES:
                raise LocalError(f"a local-path answer of {length} bytes")
            answer = compiler_pb2.LocalAnswer()
            answer.ParseFromString(self._receive(length))
            return answer
        except (OSError, DecodeError) as e:
            raise LocalError(str(e)) from e

    def close(self) -> None:
        self._sock.close()

    def _receive(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self._sock.recv(n - len(data))
            if not chunk:
                raise LocalError("the daemon closed the connection")
            data += chunk
        return bytes(data)


class AsyncLocalChannel:
    """The local path for asyncio: one connection, for the event loop and
    process that opened it. Requests take turns (the answers come in order);
    one cancelled between its frame and its answer leaves the channel broken,
    since that answer would otherwise be read as the next caller's."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.get_running_loop()
        self.broken = False
        self._reader, self._writer = reader, writer
        self._greeted = False
        self._turn = asyncio.Lock()

    @classmethod
    async def open(cls, socket_path: str) -> AsyncLocalChannel:
        """A connection with the preface sent (its answer is read with the
        first answer); LocalError when nothing accepts in time."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(socket_path), OPEN_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            raise LocalError(f"connect to {socket_path}: {e or 'timed out'}") from e
        writer.write(PREFACE)
        return cls(reader, writer)

    async def ask(self, request: Any) -> Any:
        """:meth:`LocalChannel.ask` as a coroutine."""
        payload = request.SerializeToString()
        async with self._turn:
            if self.broken:
                raise LocalError("the connection broke")
            try:
                return await asyncio.wait_for(self._exchange(payload), ASK_TIMEOUT_S)
            except (OSError, DecodeError, EOFError, asyncio.TimeoutError, LocalError) as e:
                self.close()
                raise LocalError(str(e) or type(e).__name__) from e
            except BaseException:
                self.close()  # cancelled: this request's answer may still come
                raise

    def close(self) -> None:
        self.broken = True
        self._writer.close()

    async def _exchange(self, payload: bytes) -> Any:
        self._writer.write(struct.pack("<I", len(payload)) + payload)
        await self._writer.drain()
        if not self._greeted:
            if await self._reader.readexactly(len(PREFACE)) != PREFACE:
                raise LocalError("the daemon does not speak the local path")
            self._greeted = True
        (length,) = struct.unpack("<I", await self._reader.readexactly(4))
        if length > _MAX_ANSWER_BYTES:
            raise LocalError(f"a local-path answer of {length} bytes")
        answer = compiler_pb2.LocalAnswer()
        answer.ParseFromString(await self._reader.readexactly(length))
        return answer
