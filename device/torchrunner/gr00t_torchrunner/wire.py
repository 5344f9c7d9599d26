"""The runner protocol's transport (device/RUNNER.md, version 1).

AF_UNIX SOCK_SEQPACKET: one sendmsg is one message, a descriptor in SCM_RIGHTS travels with its
message. Every message is a 16-byte header (magic b"GRNR", u32 LE type, u64 LE id) and a UTF-8 JSON
body (possibly empty), at most 1 MiB in all.

Conn.send may be called from any thread (one lock); Conn.recv from one thread only.
"""
from __future__ import annotations

import array
import json
import os
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any, Optional

PROTOCOL_VERSION = 1
MAGIC = b"GRNR"
HEADER = struct.Struct("<4sIQ")
MAX_MESSAGE = 1 << 20

HELLO, ATTACH, ATTACHED, PREDICT, RESULT, ERROR, CANCEL, PING, PONG, CLOSE, CLOSED = range(1, 12)

KIND_INPUT, KIND_DEVICE, KIND_CANCELLED, KIND_PROTOCOL = "input", "device", "cancelled", "protocol"


class ProtocolError(Exception):
    """A message that breaks the transport (no magic, too large): the connection is unusable."""


class Closed(Exception):
    """The peer closed the socket (end of file)."""


@dataclass
class Message:
    typ: int
    id: int
    body: bytes
    fd: int = -1  # a descriptor received with the message, -1 if none

    def json(self) -> Any:
        """The body decoded as JSON (None for an empty body); ValueError if it is not JSON."""
        if not self.body:
            return None
        return json.loads(self.body.decode("utf-8"))


class Conn:
    """One end of a runner socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._wlock = threading.Lock()

    @classmethod
    def from_fd(cls, fd: int) -> "Conn":
        s = socket.socket(fileno=fd)
        if s.family != socket.AF_UNIX or s.type != socket.SOCK_SEQPACKET:
            raise ProtocolError(f"fd {fd} is not an AF_UNIX SOCK_SEQPACKET socket (family {s.family}, type {s.type})")
        return cls(s)

    def send(self, typ: int, mid: int, body: Any = None, fd: int = -1) -> None:
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        msg = HEADER.pack(MAGIC, typ, mid) + data
        if len(msg) > MAX_MESSAGE:
            raise ProtocolError(f"message type {typ} of {len(msg)} bytes is over {MAX_MESSAGE}")
        anc = [] if fd < 0 else [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        with self._wlock:
            self.sock.sendmsg([msg], anc)

    def recv(self) -> Message:
        """The next message; raises Closed at end of file and ProtocolError for a broken one
        (descriptors that came with it are closed)."""
        fds = array.array("i")
        data, anc, flags, _ = self.sock.recvmsg(MAX_MESSAGE + 1, socket.CMSG_LEN(4 * fds.itemsize))
        got: list = []
        for level, typ, payload in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(payload[: len(payload) - len(payload) % a.itemsize])
                got.extend(a)
        if not data and not got:
            raise Closed("runner socket closed by the client")
        fd = got[0] if got else -1
        for extra in got[1:]:
            os.close(extra)

        def broken(why: str) -> ProtocolError:
            if fd >= 0:
                os.close(fd)
            return ProtocolError(why)

        if flags & (socket.MSG_TRUNC | getattr(socket, "MSG_CTRUNC", 0)) or len(data) > MAX_MESSAGE:
            raise broken(f"message over {MAX_MESSAGE} bytes")
        if len(data) < HEADER.size:
            raise broken(f"message of {len(data)} bytes is shorter than the 16-byte header")
        magic, typ, mid = HEADER.unpack_from(data)
        if magic != MAGIC:
            raise broken(f"message without the magic {MAGIC!r} (got {magic!r})")
        return Message(typ, mid, bytes(data[HEADER.size:]), fd)

    def close(self) -> None:
        self.sock.close()


def close_fd(fd: Optional[int]) -> None:
    if fd is not None and fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass
