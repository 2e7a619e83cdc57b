"""The control channel without a controller process: the server's request handling called
directly (the os-ken ECS and CNC apps as programmers, no switch connected), and a real loopback
round trip through the client (controller.channel_client) to the same handler."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from controller.channel import ChannelHandler, serve_connection
from controller.channel_client import Channel, ChannelError, decode, encode
from controller.cnc import CNCApp
from controller.ecs import ECSApp
from controller.fabric import Fabric
from topologies.build import load_network


@pytest.fixture
def handler():
    fab = Fabric(load_network("topologies/psnet-testbed.yaml"), event_log="")
    ECSApp(fabric=fab)  # the apps register themselves as the fabric's programmers
    CNCApp(fabric=fab)
    return ChannelHandler(fab)


def ask(handler: ChannelHandler, **req: object) -> dict:
    """One request through the wire format, as the socket loop does it."""
    return decode(handler.reply(encode(req)))


def events(handler: ChannelHandler) -> list[str]:
    return [e["event"] for e in ask(handler, op="events")["events"]]


def test_wire_format_is_one_json_object_per_line():
    line = encode({"op": "link", "a": "t1_1", "b": "ps1_1", "up": False})
    assert line.endswith("\n") and line.count("\n") == 1
    assert decode(line) == {"op": "link", "a": "t1_1", "b": "ps1_1", "up": False}
    with pytest.raises(ValueError, match="expected a JSON object"):
        decode("[1, 2]")


def test_status_state_and_log(handler):
    st = ask(handler, op="status")
    assert st["ok"] and st["ready"] is False and st["connected"] == 0
    state = ask(handler, op="state")
    assert state["ok"] and state["deployment"] == {"1": [2, 2, 2]}
    logged = ask(handler, op="log", event="job-start", fields={"job": "j"})
    assert logged["ok"] and logged["event"]["job"] == "j"
    assert events(handler) == ["job-start"]


def test_reconfigure_runs_the_papers_sequence(handler):
    reply = ask(handler, op="reconfigure", worker="w1_1_1", tor="t1_3", dark_ms=0)
    assert reply["ok"] and reply["circuits"]["w1_1_1"] == "t1_3"
    assert reply["recircuited"] == ["ecs1"] and reply["deployment"] == {"1": [1, 2, 3]}
    assert reply["ms"] >= 0
    assert events(handler) == ["tc", "ccc", "ecs", "cnc"]


def test_link_failure_recircuits_and_repair_returns(handler):
    reply = ask(handler, op="link", a="t1_1", b="ps1_1", up=False)
    assert reply["recircuited"] == ["ecs1"] and sorted(reply["deployment"]["1"]) == [0, 3, 3]
    assert len(reply["down"]) == 1
    assert events(handler) == ["link", "tc", "ccc", "ecs", "cnc"]
    back = ask(handler, op="link", a="t1_1", b="ps1_1", up=True)
    assert back["deployment"] == {"1": [2, 2, 2]} and back["down"] == []


def test_node_failure(handler):
    reply = ask(handler, op="node", name="t1_2", up=False)
    assert reply["ok"] and reply["deployment"]["1"][1] == 0


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (encode({"op": "nosuch"}), "unknown op 'nosuch'; ops: status, state"),
        (encode({"op": "reconfigure", "worker": "w1_1_1"}), "'tor'"),
        (encode({"op": "link", "a": "t1_1", "b": "t1_2", "up": False}), "no link between t1_1 and t1_2"),
        (encode({"op": "reconfigure", "worker": "w1_1_1", "tor": "ps1_1"}), "ps1_1"),
        ("not json\n", "Expecting value"),
    ],
)
def test_refused_requests_are_one_error_reply(handler, line, error):
    reply = json.loads(handler.reply(line))
    assert reply["ok"] is False and error in reply["error"]


def test_round_trip_over_loopback(handler):
    """The client and the server's connection loop over a real 127.0.0.1 socket."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve_one() -> None:
        conn, _ = server.accept()
        serve_connection(conn, handler)

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    ch = Channel(port, timeout_s=10).connect(wait_s=5)
    try:
        assert ch.request("state")["circuits"]["w1_2_1"] == "t1_2"
        assert ch.request("reconfigure", worker="w1_2_1", tor="t1_1", dark_ms=0)["deployment"] == {"1": [3, 1, 2]}
        with pytest.raises(ChannelError, match="unknown op 'bogus'"):
            ch.request("bogus")
        assert ch.request("status")["ok"]  # the connection survives a refused request
    finally:
        ch.close()
        server.close()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_requests_from_two_threads_each_get_their_own_reply(handler):
    """The run's thread and a sampler thread share one Channel: every reply goes to its request
    (unlocked, a `state` sent during another request's wait took that request's reply)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    thread = threading.Thread(target=lambda: serve_connection(server.accept()[0], handler), daemon=True)
    thread.start()
    ch = Channel(port, timeout_s=10).connect(wait_s=5)
    wrong: list[str] = []

    def ask(op: str, key: str) -> None:
        for _ in range(200):
            reply = ch.request(op)
            if key not in reply:
                wrong.append(f"{op} got {sorted(reply)}")

    try:
        askers = [threading.Thread(target=ask, args=a) for a in (("state", "circuits"), ("status", "ok"))]
        for a in askers:
            a.start()
        for a in askers:
            a.join(timeout=30)
        assert wrong == []
    finally:
        ch.close()
        server.close()
    thread.join(timeout=5)


def test_client_says_when_nothing_answers():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ChannelError, match=f"controller channel 127.0.0.1:{port} not answering"):
        Channel(port).connect(wait_s=0.3)
