"""tc/ethtool argv builders: pure lists, checked without root."""

from __future__ import annotations

import pytest

from emulation.shaping import (
    HZ,
    QUANTUM_BYTES,
    QUEUE_PKTS,
    burst_bytes,
    fair_buckets,
    fair_htb_cmds,
    htb_cmds,
    leaf_qdisc,
    mtu_cmd,
    offload_cmd,
    queue_pkts_for,
    rx_napi_cmds,
    tc_batch,
)


def argv(line: str) -> list[str]:
    """An expected command written as one readable line."""
    return line.split()


def opt(cmd: list[str], name: str) -> str:
    """The value following option `name` in an argv list."""
    return cmd[cmd.index(name) + 1]


@pytest.mark.parametrize(
    ("mbps", "expected"),
    [(1, 15000), (25, 15000), (30, 15000), (40, 20000), (100, 50000), (1000, 500000)],
)
def test_burst_is_one_tick_at_the_rate_but_at_least_15000_bytes(mbps, expected):
    assert burst_bytes(mbps) == expected
    assert burst_bytes(mbps) >= 15000
    assert burst_bytes(mbps) >= mbps * 1e6 / 8 / HZ - 1


def test_htb_commands_without_delay():
    cmds = htb_cmds("w1_1_1-eth1", 100)
    assert cmds == [
        argv("tc qdisc replace dev w1_1_1-eth1 root handle 5: htb default 1"),
        argv(
            "tc class replace dev w1_1_1-eth1 parent 5: classid 5:1 htb rate 100mbit ceil 100mbit "
            "burst 50000b cburst 50000b quantum 1514"
        ),
        argv("tc qdisc replace dev w1_1_1-eth1 parent 5:1 handle 10: pfifo limit 1000"),
    ]


def test_htb_class_has_explicit_quantum_and_burst():
    (_, cls, _) = htb_cmds("t1_1-eth3", 12.5)
    assert opt(cls, "quantum") == str(QUANTUM_BYTES) == "1514"
    assert opt(cls, "burst") == opt(cls, "cburst") == "15000b"
    assert int(opt(cls, "burst").removesuffix("b")) >= 15000


@pytest.mark.parametrize(
    ("mbps", "rate"),
    [(100, "100mbit"), (12.5, "12.5mbit"), (0.5, "0.5mbit"), (33.333333333, "33.3333mbit"), (1000, "1000mbit")],
)
def test_rate_string_is_mbit(mbps, rate):
    (_, cls, _) = htb_cmds("x-eth1", mbps)
    assert opt(cls, "rate") == opt(cls, "ceil") == rate


def test_root_default_class_is_the_shaped_class():
    root, cls, leaf = htb_cmds("x-eth1", 50)
    assert (opt(root, "handle"), opt(root, "default")) == ("5:", "1")
    assert (opt(cls, "parent"), opt(cls, "classid")) == ("5:", "5:1")
    assert opt(leaf, "parent") == "5:1"


def test_queue_length_is_passed_in_packets():
    assert htb_cmds("x-eth1", 50)[2][-2:] == ["limit", str(QUEUE_PKTS)]
    assert htb_cmds("x-eth1", 50, queue_pkts=64)[2][-2:] == ["limit", "64"]


@pytest.mark.parametrize("delay_ms", [0, 0.0])
def test_no_netem_without_delay(delay_ms):
    cmds = htb_cmds("x-eth1", 50, delay_ms=delay_ms)
    assert not any("netem" in c for c in cmds)
    assert cmds[2] == argv("tc qdisc replace dev x-eth1 parent 5:1 handle 10: pfifo limit 1000")


@pytest.mark.parametrize(("delay_ms", "text"), [(2, "2ms"), (0.02, "0.02ms"), (10.5, "10.5ms")])
def test_netem_leaf_only_with_delay(delay_ms, text):
    cmds = htb_cmds("x-eth1", 50, queue_pkts=200, delay_ms=delay_ms)
    assert len(cmds) == 3
    assert not any("pfifo" in c for c in cmds)
    assert cmds[2] == argv(f"tc qdisc replace dev x-eth1 parent 5:1 handle 10: netem delay {text} limit 200")


def test_every_command_is_an_argv_of_strings():
    for cmd in htb_cmds("x-eth1", 7.25, delay_ms=1) + [offload_cmd("x-eth1")]:
        assert all(isinstance(a, str) and a and " " not in a for a in cmd)


def test_offload_cmd_turns_off_all_offloads():
    assert offload_cmd("ps1_1-eth2") == argv("ethtool -K ps1_1-eth2 tx off rx off tso off gso off gro off")


def test_with_userspace_tso_offloads_stay_on_and_queues_count_bytes():
    assert offload_cmd("ps1_1-eth2", tso=True) == argv("ethtool -K ps1_1-eth2 tx on rx on tso on gso on gro off")
    # the same 1000 full frames as the packet FIFO, in bytes: a 64 kB GSO packet is one packet
    assert htb_cmds("x-eth1", 50, tso=True)[2] == argv(
        "tc qdisc replace dev x-eth1 parent 5:1 handle 10: bfifo limit 1514000"
    )
    assert leaf_qdisc(167, 9000, tso=True) == ["bfifo", "limit", str(167 * 9014)]
    fair = fair_htb_cmds("s-eth1", 10, 4, "10.0.0.2", tso=True)
    assert sum("bfifo" in c for c in fair) == 4 and not any("pfifo" in c for c in fair)


def test_tc_batch_drops_the_leading_tc_and_skips_other_tools():
    cmds = htb_cmds("a-eth1", 100) + [offload_cmd("a-eth1")] + [[]] + htb_cmds("b-eth2", 10)
    lines = tc_batch(cmds).splitlines()
    assert len(lines) == 6
    assert lines[0] == "qdisc replace dev a-eth1 root handle 5: htb default 1"
    assert lines[4] == (
        "class replace dev b-eth2 parent 5: classid 5:1 htb rate 10mbit ceil 10mbit "
        "burst 15000b cburst 15000b quantum 1514"
    )
    assert lines[5] == "qdisc replace dev b-eth2 parent 5:1 handle 10: pfifo limit 1000"
    assert tc_batch(cmds).endswith("\n")
    assert tc_batch([]) == ""


def test_rx_napi_turns_gro_on_and_threads_napi_on_host_ends_only():
    cmds = rx_napi_cmds(["h1-eth0", "h1-eth1"])
    assert cmds[:2] == [argv("ethtool -K h1-eth0 gro on"), argv("ethtool -K h1-eth1 gro on")]
    assert cmds[2][:3] == ["unshare", "-m", "sh"]
    assert "echo 1 > /mnt/class/net/h1-eth1/threaded" in cmds[2][-1]
    assert rx_napi_cmds([]) == []


def test_jumbo_frames_keep_a_frame_quantum_and_the_queue_in_bytes():
    (_, cls, leaf) = htb_cmds("x-eth1", 12.5, mtu=9000)
    assert opt(cls, "quantum") == "9014"
    assert opt(cls, "burst") == "18028b"  # two jumbo frames: one tick at 12.5 Mbit/s (6,250 B) is less than one
    assert leaf[-2:] == ["limit", str(queue_pkts_for(9000))] and queue_pkts_for(9000) == 167
    assert 167 * 9014 <= QUEUE_PKTS * QUANTUM_BYTES < 168 * 9014  # the bytes 1000 frames of 1514 hold
    assert queue_pkts_for(1500) == QUEUE_PKTS


def test_mtu_cmd_sets_the_interface_mtu():
    assert mtu_cmd("w1_1_1-eth1", 9000) == argv("ip link set w1_1_1-eth1 mtu 9000")


@pytest.mark.parametrize(("hosts", "buckets"), [(1, 1), (2, 2), (9, 16), (16, 16), (17, 32), (256, 64)])
def test_a_relays_fair_queue_has_a_class_per_source_up_to_64(hosts, buckets):
    assert fair_buckets(hosts) == buckets


def test_fair_queue_hashes_sources_into_classes_that_share_the_nic():
    cmds = fair_htb_cmds("s0_3-eth1", 5, 16, "10.1.0.4")
    text = tc_batch(cmds)
    assert text.splitlines()[0] == "qdisc replace dev s0_3-eth1 root handle 5: htb default 104"  # own class
    nic, *shares = [c for c in cmds if c[:2] == ["tc", "class"]]
    assert (opt(nic, "classid"), opt(nic, "rate")) == ("5:1", "5mbit")
    assert len(shares) == 16 and {opt(c, "parent") for c in shares} == {"5:1"}
    assert {(opt(c, "rate"), opt(c, "ceil"), opt(c, "quantum")) for c in shares} == {("0.3125mbit", "5mbit", "65536")}
    assert "hashkey mask 0x0000000f at 12 link 2:" in text  # the source address's low 4 bits
    flowids = [opt(c, "flowid") for c in cmds if "flowid" in c]
    assert flowids == [f"5:{0x100 + i:x}" for i in range(16)]
    assert sum("pfifo" in c for c in cmds) == 16


def test_fair_queue_keeps_netem_per_class_when_delayed():
    cmds = fair_htb_cmds("s0_3-eth1", 5, 4, "10.1.0.4", delay_ms=2)
    assert sum("netem" in c for c in cmds) == 4 and not any("pfifo" in c for c in cmds)
