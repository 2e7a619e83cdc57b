"""Inventory files (servers.inventory), /proc parsing for hardware runs (servers.hostload) and
`testbed compare`'s table (testbed.compare): no SSH, no TensorFlow."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runs.summary import summary_of
from servers.hostload import iface_with, parse_net_dev, parse_stat
from servers.inventory import InventoryError, load_inventory, place
from testbed.compare import Run, compare, nic_bytes
from topologies.build import load_network

ROOT = Path(__file__).resolve().parent.parent
NET = load_network(ROOT / "topologies" / "psnet-testbed.yaml")


def write(tmp_path: Path, hosts: list[dict], **top) -> Path:
    (tmp_path / "known_hosts").write_text("")
    p = tmp_path / "inv.yaml"
    p.write_text(yaml.safe_dump({"known_hosts": "known_hosts", "hosts": hosts, **top}))
    return p


def host(name: str, data: str, **kw) -> dict:
    return {"name": name, "ssh": {"host": f"{name}.lan"}, "data": data, **kw}


def test_hosts_fill_by_role_then_capacity_and_share_a_server_on_consecutive_ports(tmp_path):
    inv = load_inventory(
        write(tmp_path, [host("a", "10.0.0.1", role="any", capacity=2), host("b", "10.0.0.2", role="worker")])
    )
    assert inv.known_hosts == tmp_path / "known_hosts"  # relative to the inventory file
    got = place(inv, NET, ["ps1_1", "w1_1_1", "w1_2_1"], "inv.yaml")
    assert {h: (p.server.name, p.address) for h, p in got.items()} == {
        "ps1_1": ("a", "10.0.0.1:2222"),
        "w1_1_1": ("a", "10.0.0.1:2223"),
        "w1_2_1": ("b", "10.0.0.2:2222"),
    }


def test_explicit_as_wins_over_the_order(tmp_path):
    inv = load_inventory(
        write(tmp_path, [host("a", "10.0.0.1", capacity=2), host("b", "10.0.0.2", capacity=2, **{"as": "w1_1_1"})])
    )
    got = place(inv, NET, ["ps1_1", "w1_1_1", "w1_2_1"], "inv.yaml")
    assert {h: p.server.name for h, p in got.items()} == {"ps1_1": "a", "w1_1_1": "b", "w1_2_1": "a"}


@pytest.mark.parametrize(
    ("hosts", "needed", "message"),
    [
        ([host("a", "10.0.0.1", role="worker")], ["ps1_1"], "inv.yaml: hosts: no server left with capacity for ps1_1"),
        ([host("a", "10.0.0.1", role="worker", **{"as": "ps1_1"})], ["ps1_1"], "ps1_1 is a ps but the server's role"),
        ([host("a", "10.0.0.1", **{"as": "t1_1"})], ["ps1_1"], "hosts[a].as: t1_1 is not a host of the topology"),
    ],
)
def test_placement_problems_are_one_line(tmp_path, hosts, needed, message):
    inv = load_inventory(write(tmp_path, hosts))
    with pytest.raises(InventoryError) as err:
        place(inv, NET, needed, "inv.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("hosts", "top", "message"),
    [
        ([host("a", "10.0.0.300")], {}, "hosts.0.data"),
        ([host("a", "10.0.0.1"), host("b", "10.0.0.1")], {}, "data 10.0.0.1 is given twice"),
        ([host("a", "10.0.0.1", capacity=1, **{"as": ["w1_1_1", "w1_2_1"]})], {}, "capacity 1"),
        ([host("a", "10.0.0.1", rol="ps")], {}, "hosts.0.rol"),
        ([host("a", "10.0.0.1")], {"known_hosts": "nope"}, "known_hosts: "),
    ],
)
def test_bad_inventory_files_are_one_line_naming_the_field(tmp_path, hosts, top, message):
    with pytest.raises(InventoryError) as err:
        load_inventory(write(tmp_path, hosts, **top))
    text = str(err.value)
    assert text.startswith(str(tmp_path / "inv.yaml")) and message in text and "\n" not in text


def test_missing_key_file_is_one_line(tmp_path):
    h = host("a", "10.0.0.1")
    h["ssh"]["key"] = "keys/id"
    with pytest.raises(InventoryError, match=r"hosts\.0\.ssh\.key: .*keys/id not found"):
        load_inventory(write(tmp_path, [h]))


PROC = """cpu  100 5 50 800 20 0 5 0 0 0
cpu0 50 2 25 400 10 0 3 0 0 0
cpu1 50 3 25 400 10 0 2 0 0 0
intr 1
Inter-|   Receive                                                |  Transmit
 face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed
    lo: 10 1 0 0 0 0 0 0 10 1 0 0 0 0 0 0
  eth1: 123456 100 0 0 0 0 0 0 654321 90 0 0 0 0 0 0
"""


def test_proc_stat_and_net_dev_parse():
    assert parse_stat(PROC) == (160, 980, 2)  # busy leaves out idle (800) and iowait (20)
    assert parse_net_dev(PROC, "eth1") == (123456, 654321)
    with pytest.raises(ValueError, match="no interface eth9"):
        parse_net_dev(PROC, "eth9")
    ip = (
        "1: lo    inet 127.0.0.1/8 scope host lo\n3: eth1@if4    inet 192.168.214.1/24 brd 192.168.214.255 scope global"
    )
    assert iface_with(ip, "192.168.214.1") == "eth1" and iface_with(ip, "192.168.214.9") is None


def test_compare_sets_an_emulated_and_a_real_run_side_by_side():
    bct = {"n": 3, "mean": 2.0, "p50": 2.0, "ci95": 0.1}
    emulated = {
        "complete": True,
        "bct_s": bct,
        "model": "tiny",
        "ps_hosts": ["ps1_1"],
        "bytes_per_ps": {"/job:ps/task:0": 1000},
        "ps_nic_bytes": {"ps1_1": {"ps1_1-eth1": {"rx": 5, "tx": 7}, "ps1_1-eth2": {"rx": 1, "tx": 0}}},
        "predicted": {"equation": None, "note": "no model"},
    }
    real = {
        **emulated,
        "bct_s": {**bct, "mean": 3.0},
        "ps_nic_bytes": None,
        "prediction_applies": "when the network is that",
        "hardware": {
            "placements": {"ps1_1": {"server": "s1", "address": "10.0.0.1:2222"}},
            "servers": {"s1": {"rx_bytes": 1, "tx_bytes": 1, "run_rx_bytes": 2_000_000, "run_tx_bytes": 1_000_000}},
        },
    }
    emulated, real = summary_of(emulated), summary_of(real)
    assert nic_bytes(emulated) == {"ps1_1": 13} and nic_bytes(real) == {"ps1_1": 3_000_000}
    table = compare(Run("emu", emulated), Run("real", real))
    lines = table.splitlines()
    assert lines[1].split() == ["mode", "emulated", "hardware"]
    assert (
        "ps1_1: 3.000 MB" in table and "1.50x" in lines[-2] and lines[-1] == "real: model is when the network is that"
    )
