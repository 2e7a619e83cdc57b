"""What a full TCP segment carries on a shaped cable: the header sizes and the payload's share.

No imports, so that the flow model's simulation subprocess (models.flow.simgrid, kept free of the
topology package) charges the same headers the emulator's shaping counts (emulation.shaping).
"""

ETH_HEADER = 14  # bytes HTB counts beyond the IP packet
#: bytes of IP and TCP headers with the timestamp option (Linux's default) in a full segment
TCP_IP_HEADERS = 52


def mss_bytes(mtu: int) -> int:
    """TCP payload of a full segment at `mtu` (1448 at 1500): converts segments to bytes."""
    return mtu - TCP_IP_HEADERS


def header_factor(mtu: int) -> float:
    """Payload bytes per wire byte of a full TCP segment, as HTB counts the wire: (MTU - 52) /
    (MTU + 14), 1448 / 1514 at MTU 1500 and 8948 / 9014 at 9000 (IP 20 + TCP 20 + timestamps 12
    inside the MTU, Ethernet 14 outside it). The flow model charges it, the benchmarks turn
    goodput into wire rate with it, and its inverse is the least GST over the busiest cable any run
    over TCP reads."""
    return mss_bytes(mtu) / (mtu + ETH_HEADER)
