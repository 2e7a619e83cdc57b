"""The client side of the controller's loopback control channel, and its wire format.

JSON lines over TCP on 127.0.0.1: one request object per line (`{"op": ..., **fields}`), one
reply object per line (`{"ok": true, ...}` or `{"ok": false, "error": "..."}`). Kept apart from
the os-ken app that serves it (controller.channel) so that the testbed process, which only
talks to the controller, never imports os-ken.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import TextIO

HOST = "127.0.0.1"


class ChannelError(RuntimeError):
    """The controller did not answer, or refused a request; the message says which."""


def encode(message: dict) -> str:
    """One request or reply as a line of the wire format."""
    return json.dumps(message) + "\n"


def decode(line: str) -> dict:
    """A line of the wire format back to its object; ValueError if it is not a JSON object."""
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object per line, got {type(obj).__name__}")
    return obj


def error_reply(err: Exception) -> dict:
    """The reply to a refused request: the error's message for the user."""
    return {"ok": False, "error": str(err)}


class Channel:
    """One connection to the controller's control channel. Thread-safe: a request and its reply
    are one exchange under a lock, so a sampler thread asking for `state` while the run's thread
    waits out a reconfiguration's dark period cannot take the other's reply (it did, and the
    socket then timed out for both)."""

    def __init__(self, port: int, timeout_s: float = 30.0) -> None:
        self.port = port
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._file: TextIO | None = None
        self._lock = threading.Lock()

    def connect(self, wait_s: float = 15.0) -> Channel:
        """Connect, retrying while the controller process starts."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._sock = socket.create_connection((HOST, self.port), timeout=self.timeout_s)
                self._file = self._sock.makefile("rw")
                return self
            except OSError as err:
                if time.monotonic() > deadline:
                    raise ChannelError(f"controller channel {HOST}:{self.port} not answering: {err}") from None
                time.sleep(0.1)

    def request(self, op: str, **fields: object) -> dict:
        """Send one request; return the reply, raise ChannelError if the controller refused it."""
        with self._lock:
            if self._file is None:
                self.connect()
            assert self._file is not None
            try:
                self._file.write(encode({"op": op, **fields}))
                self._file.flush()
                line = self._file.readline()
            except OSError as err:
                raise ChannelError(f"controller channel broke during {op}: {err}") from None
        if not line:
            raise ChannelError(f"controller closed the channel during {op} (did it crash?)")
        try:
            reply = decode(line)
        except ValueError as err:
            raise ChannelError(f"controller sent a malformed reply to {op}: {err}") from None
        if not reply.get("ok"):
            raise ChannelError(reply.get("error", f"{op} failed"))
        return reply

    def close(self) -> None:
        if self._sock:
            self._sock.close()
        self._sock = self._file = None
