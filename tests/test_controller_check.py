"""The controller check at bring-up cannot fail on the controller's OpenFlow HELLO.

Mininet's RemoteController checks a controller with `echo A | telnet -e A IP PORT` in a shell
and decodes telnet's output as UTF-8. os-ken sends its HELLO as soon as a connection opens; its
xid is random, so it is usually not UTF-8, and when telnet prints it before reading the escape
character (under load) the decoder raises UnicodeDecodeError. A loopback server plays the
controller here. No bridge is built: only the controller node's shell (mnexec), hence root.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from mininet.node import RemoteController

from emulation.net import ProbedController

pytestmark = pytest.mark.root

#: an OpenFlow 1.3 HELLO as os-ken sends it: header (version 4, type 0, length 16, a random xid,
#: here one that is not UTF-8) and the version-bitmap element (OpenFlow 1.3 only)
HELLO = b"\x04\x00\x00\x10" + b"\x9a\xad\xbe\xef" + b"\x00\x01\x00\x08\x00\x00\x00\x10"


@pytest.fixture
def controller_port() -> Iterator[int]:
    """A loopback server that sends HELLO on every connection, as an OpenFlow controller does."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.1)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            conns.append(conn)
            conn.sendall(HELLO)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        srv.close()
        for c in conns:
            c.close()


def test_mininet_check_fails_when_the_hello_comes_first(controller_port):
    """Mininet's own command, with the HELLO printed before telnet reads its escape character
    (the order under load; the sleep makes it certain): decoding telnet's output raises."""
    c0 = RemoteController("c0", ip="127.0.0.1", port=free_port())  # nobody there: only a warning
    try:
        with pytest.raises(UnicodeDecodeError):
            c0.cmd(f"(sleep 0.5; echo A) | telnet -e A 127.0.0.1 {controller_port}")
    finally:
        c0.terminate()


def test_probed_controller_connects_without_reading_the_hello(controller_port):
    c0 = ProbedController("c0", ip="127.0.0.1", port=controller_port)  # the check runs here
    try:
        assert c0.isListening("127.0.0.1", controller_port)
        assert c0.cmd("echo shell-ok").strip() == "shell-ok"  # its shell was never fed the HELLO
    finally:
        c0.terminate()


def test_probed_controller_reports_a_port_nobody_listens_on():
    port = free_port()
    c0 = ProbedController("c0", ip="127.0.0.1", port=port)
    try:
        assert not c0.isListening("127.0.0.1", port)
    finally:
        c0.terminate()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
