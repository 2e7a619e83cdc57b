"""The emulated network's lifecycle: file -> model -> controller + Mininet -> routed, shaped net.

    with Testbed("topologies/psnet-testbed.yaml") as tb:
        tb.host("w1_1_1").cmd("ping -c1 10.1.0.1")
        tb.reconfigure("w1_1_1", "t1_3")

Order (the paper's control sequence, Section 3.3): the controller process starts and its TC
computes the circuit map; Mininet builds the hosts, links and userspace-OVS bridges (fail-mode
secure: nothing forwards before the controller says so, so no loops and no floods); the ECS app
programs circuits, the CNC app programs routes; the testbed sets addresses, static neighbours,
multi-NIC routes, offloads and HTB shaping in the hosts; then "start" is logged. Stopping runs on
every exit path and leaves no bridge, namespace or process behind.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mininet.net import Mininet

from controller.channel_client import Channel, ChannelError
from controller.routing import HostRoute, compute_paths, host_routes
from emulation import datapath, doctor, registry, rto, tso
from emulation.bringup import ProbedController, RegisteredNet, TestbedError, make_mininet
from emulation.env import clean_env
from emulation.fidelity import Monitor
from emulation.flows import FlowSampler
from emulation.hostcmd import run_all
from emulation.relaying import RelayLoad
from emulation.shaping import (
    fair_buckets,
    fair_class_cmds,
    fair_htb_cmds,
    htb_cmds,
    mtu_cmd,
    offload_cmd,
    queue_pkts_for,
    rx_napi_cmds,
    tc_batch,
)
from topologies import kinds
from topologies.build import load_network
from topologies.model import Network

LOG = logging.getLogger(__name__)
#: hosts receive in NAPI threads of their own, not in ovs-vswitchd's (emulation.shaping.rx_napi_cmds);
#: PSNET_RX_NAPI=0 turns it off, to compare
RX_NAPI = os.environ.get("PSNET_RX_NAPI", "1") != "0"


#: the signal that interrupted this process ("SIGTERM", "SIGHUP"; "" for none or Ctrl-C)
INTERRUPTED_BY = ""
#: what the signals that unwind mean, for the line that says so
UNWIND_SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP: its terminal or SSH session closed"}


def unwind_on_signals() -> None:
    """Make SIGTERM and SIGHUP raise KeyboardInterrupt in this process, so a `with Testbed` in
    flight unwinds and tears everything down: their default action would end the process at once
    and leave bridges and shells behind. SIGHUP is how a run dies when the SSH session of a VM
    closes. Only the first one raises: a closed session sends SIGHUP twice (the kernel and the
    shell), and a second KeyboardInterrupt would cut the teardown short."""

    def _raise(sig: int, _frame: object) -> None:
        global INTERRUPTED_BY
        if INTERRUPTED_BY:
            return
        INTERRUPTED_BY = UNWIND_SIGNALS[signal.Signals(sig)]
        raise KeyboardInterrupt

    for sig in UNWIND_SIGNALS:
        signal.signal(sig, _raise)


def interrupt_reason() -> str:
    """Why this process was interrupted: "by SIGHUP: its terminal ..." or "by the user" (Ctrl-C)."""
    return f"by {INTERRUPTED_BY}" if INTERRUPTED_BY else "by the user"


#: how a run opens its testbed, where something other than this machine's Testbed is wanted (the
#: CLI's --cluster: a ClusterTestbed over a cluster file's servers); see `testbeds`
_opener: Callable[[Network], Testbed] | None = None


def open_testbed(net: Network) -> Testbed:
    """The testbed a run brings its network up on (runs.runner, runs.engine_job): this machine's,
    unless `testbeds` named another for the runs inside it. The runs need not know which."""
    return _opener(net) if _opener is not None else Testbed(net)


@contextmanager
def testbeds(opener: Callable[[Network], Testbed]) -> Iterator[None]:
    """Within this block, runs open their testbed with `opener` (a module-level setting rather
    than an argument threaded through every pipeline: runs on threads see it too)."""
    global _opener
    before, _opener = _opener, opener
    try:
        yield
    finally:
        _opener = before


def free_port() -> int:
    """A free TCP port on loopback (the kernel picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Testbed:
    """A running emulation of one topology file; use as a context manager."""

    __test__ = False  # not a pytest class

    def __init__(self, topology: str | Path | Network, ready_timeout_s: float = 30.0, tso: bool | None = None) -> None:
        self.model = topology if isinstance(topology, Network) else load_network(topology)
        self.source = str(topology) if not isinstance(topology, Network) else "<model>"
        self.ready_timeout_s = ready_timeout_s
        self.mn: Mininet | None = None
        self.controller: subprocess.Popen | None = None
        self.channel: Channel | None = None
        self.run = RegisteredNet(self.model, self.source)
        self.routes: dict[str, list[HostRoute]] = {}
        self.timings: dict[str, float] = {}
        #: the datapath carries GSO packets whole (emulation.tso); decided at start
        self.tso = False
        #: what was asked for it: True or False forces it (a benchmark of both), None chooses
        self._want_tso = tso

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def run_dir(self) -> Path:
        """This run's private folder (registry): state, controller log, batch files."""
        return self.run.run_dir

    # --- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what a run measures it with -----------------------------------------------------------
    def monitor(self, relay: RelayLoad | None = None) -> Monitor:
        """The run's fidelity monitor, not started: this machine's CPU, ovs-vswitchd and switch
        ports (a testbed over several servers reads each server's)."""
        return Monitor(self.model, relay=relay, tso=self.tso)

    def flow_sampler(self) -> FlowSampler:
        """The sampler of flows on the busiest shared cable, not started (emulation.flows)."""
        return FlowSampler.of(self)

    def start(self) -> None:
        problems = doctor.blocking_problems(self.model.spec)
        if problems:
            raise TestbedError(problems[0])
        self.run.open(float(os.environ.get("PSNET_LOCK_WAIT_S", "0")))
        t0 = self.run.locked_at  # bring-up is timed from here: queueing for the lock is not part of it
        self.timings["lock_wait_s"] = self.run.lock_wait_s
        self.tso = self._use_tso()
        self._start_controller()
        self.mn = self.run.build(self._make_mininet())
        self._configure_hosts()
        self.run.start()
        self._shape()  # after start: OVS resets the root qdisc of a port when it adds it to a bridge
        self._wait_ready()
        self.sync_host_routes()
        self._room_for_queues()
        self.timings["bring_up_s"] = time.monotonic() - t0
        self.log("start", bring_up_s=round(self.timings["bring_up_s"], 3), tso=self.tso)

    def stop(self) -> None:
        """Tear everything down; safe to call twice and after a partial start."""
        if self.channel:
            self.channel.close()
            self.channel = None
        self.run.stop_mininet()
        self.mn = None
        if self.controller is not None:
            self.controller.kill()
            self.controller.wait()
            self.controller = None
        self.run.close()

    # --- pieces of start ---------------------------------------------------------------------
    def _use_tso(self) -> bool:
        """Userspace TSO when this machine's ovs-vswitchd took it and the run asked for it, or
        (asked nothing) unless PSNET_TSO=0 (emulation.tso.enabled)."""
        if self._want_tso is not None:
            return self._want_tso and tso.daemon_has_tso()
        return tso.enabled()

    def _make_mininet(self) -> Mininet:
        """The unbuilt Mininet of the model, its switches dialling the controller on loopback."""
        mn = make_mininet(self.model, protocols="OpenFlow13", failMode="secure")
        mn.addController(ProbedController("c0", ip="127.0.0.1", port=self.of_port))
        return mn

    def _root_shell(self, switch: str):
        """A shell in the root namespace that holds `switch`'s interfaces (here every switch's:
        one machine); root-namespace commands on its ports run there."""
        assert self.mn
        return self.mn.switches[0]

    def _start_controller(self) -> None:
        self.of_port, self.channel_port = free_port(), free_port()
        log = (self.run_dir / "controller.log").open("w")
        topo_file = self.run_dir / "topology.yaml"
        topo_file.write_text(self.model.spec.model_dump_json())  # JSON is YAML: one model, re-read
        cmd = [
            sys.executable,
            "-m",
            "controller.launch",
            "--topology",
            str(topo_file),
            "--ofp-tcp-listen-port",
            str(self.of_port),
            "--channel-port",
            str(self.channel_port),
            "--event-log",
            str(self.run_dir / "events.jsonl"),
        ]
        plugin = kinds.plugin_ref(self.model.family)
        if plugin:  # a kind not shipped: the controller imports it to rebuild this network
            cmd += ["--kind-plugin", plugin]
        self.controller = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=clean_env(), cwd=Path(__file__).resolve().parent.parent
        )
        registry.track(self.run_dir, controller_pid=self.controller.pid)
        try:
            self.channel = Channel(self.channel_port).connect(wait_s=20)
        except ChannelError as err:
            raise TestbedError(
                f"controller did not start: {err}; last log lines: {self.controller_log_tail()}"
            ) from None

    def controller_log_tail(self, lines: int = 5) -> str:
        f = self.run_dir / "controller.log"
        return " | ".join(f.read_text().splitlines()[-lines:]) if f.exists() else ""

    def _configure_hosts(self) -> None:
        """Addresses, MACs, sysctls and offloads inside every host (one shell round trip each)."""
        assert self.mn
        gso_cap = tso.gso_cap(self.model) if self.tso else 0  # one for every interface of the network
        rto_min = rto.sysctl_arg(self.model)  # the topology's RTO floor (emulation.rto), or the kernel's
        for h in self.model.hosts():
            node = self.mn.get(h.name)
            cmds = [
                [
                    "sysctl",
                    "-qw",
                    "net.ipv4.conf.all.rp_filter=0",
                    "net.ipv4.conf.default.rp_filter=0",
                    f"net.ipv4.ip_forward={1 if h.relay else 0}",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    f"net.ipv4.tcp_congestion_control={self.model.spec.tcp}",
                    *rto_min,
                ],
            ]
            for i, ln in enumerate(sorted(self.model.links_of(h.name), key=lambda x: x.port_of(h.name))):
                intf = ln.intf(h.name)
                prefix = 8 if i == 0 else 32  # one connected /8; extra NICs carry the same address
                cmds += [
                    ["ip", "link", "set", intf, "address", self.model.mac(h.name, ln.port_of(h.name))],
                    ["ip", "addr", "flush", "dev", intf],
                    ["ip", "addr", "add", f"{h.ip}/{prefix}", "dev", intf],
                    ["sysctl", "-qw", f"net.ipv4.conf.{intf.replace('.', '/')}.rp_filter=0"],
                    offload_cmd(intf, self.tso),
                    mtu_cmd(intf, self.model.spec.mtu),
                ]
                if self.tso:  # a GSO packet at most a few ms of the slowest link (emulation.tso)
                    cmds.append(tso.gso_cmd(intf, gso_cap, self.model.spec.mtu))
            if RX_NAPI:
                cmds += rx_napi_cmds([ln.intf(h.name) for ln in self.model.links_of(h.name)])
            run_all(node, cmds)

    def _shape(self) -> None:
        """HTB on both ends of every link: host ends in their namespace, switch ends in root."""
        assert self.mn
        delay, mtu = self.model.spec.delay_ms, self.model.spec.mtu
        per_host: dict[str, list[list[str]]] = {}
        root_tc: dict[str, list[list[str]]] = {}  # per root shell: one machine has one, a cluster one per server
        root_intfs: dict[str, list[str]] = {}
        for ln in self.model.veth_links():  # a patch cable has no qdisc (topologies.model.Network.is_patch)
            for end in (ln.a, ln.b):
                if self._fair_relay(end):
                    ip = self.model.nodes[end].ip
                    cmds = fair_htb_cmds(ln.intf(end), ln.mbps, self._senders, ip, mtu, delay, self.tso)
                else:
                    cmds = htb_cmds(ln.intf(end), ln.mbps, delay_ms=delay, mtu=mtu, tso=self.tso)
                if self.model.nodes[end].is_host:
                    per_host.setdefault(end, []).extend(cmds)
                else:
                    shell = self._root_shell(end).name
                    root_tc.setdefault(shell, []).extend(cmds)
                    root_intfs.setdefault(shell, []).append(ln.intf(end))
        for name, cmds in per_host.items():
            self._tc_batch(self.mn.get(name), cmds)
        for shell, intfs in root_intfs.items():
            root = self.mn.get(shell)
            self._tc_batch(root, root_tc[shell])
            for i in range(0, len(intfs), 50):
                run_all(root, [offload_cmd(x, self.tso) for x in intfs[i : i + 50]])
                run_all(root, [mtu_cmd(x, mtu) for x in intfs[i : i + 50]])
            # no IPv6 on switch ports: the root namespace's router solicitations and MLD reports
            # would ride the shaped cables and spoil the exact per-port count (emulation/datapath.py)
            # 60 names a line: a shell reads one tty line of at most 4095 characters, and a longer
            # one never completes (200 hung the bring-up of networks with > ~100 switch ports)
            for i in range(0, len(intfs), 60):
                names = intfs[i : i + 60]
                sysctls = (f"net.ipv6.conf.{x.replace('.', '/')}.disable_ipv6=1" for x in names)
                run_all(root, [["sysctl", "-qw", *sysctls]])

    def _fair_relay(self, end: str) -> bool:
        """Whether `end` is a relaying server whose NICs share fairly among senders (`relay_queue`)."""
        node = self.model.nodes[end]
        return node.is_host and node.relay and self.model.spec.relay_queue == "fair"

    @property
    def _senders(self) -> int:
        """Hosts whose packets a relay may send: every host of the network."""
        return len(self.model.hosts())

    def _room_for_queues(self) -> None:
        """Give ovs-vswitchd's send socket room for every switch-side queue of this network full
        at once (emulation.datapath.sndbuf_for): packets waiting in those queues are charged to it,
        and when it is full the datapath drops silently. Memory is taken only by queued frames."""
        ports = sum(not self.model.nodes[end].is_host for ln in self.model.veth_links() for end in (ln.a, ln.b))
        mtu = self.model.spec.mtu
        want = datapath.sndbuf_for(ports, queue_pkts_for(mtu), mtu)
        pairs = self.model.intended_pairs()
        if datapath.send_socket() is None and pairs:  # a fresh daemon makes it on its first send
            src, dst = pairs[0]
            self.host(src).cmd(f"ping -c 1 -W 1 {self.model.nodes[dst].ip}")
        try:
            LOG.debug("%s", datapath.ensure_send_buffer(want))
        except OSError as err:  # no pidfd_getfd here: the run goes on, the fidelity monitor counts drops
            LOG.warning("could not enlarge ovs-vswitchd's send buffer to %d bytes: %s", want, err)

    def _tc_batch(self, node, cmds: list[list[str]]) -> None:
        self._batch(node, "tc", tc_batch(cmds))

    def _batch(self, node, tool: str, text: str) -> None:
        """Run `tool -batch` (tc, ip) over `text` in `node`'s namespace, from a file of the run
        folder (kept for `testbed clean` and post-mortems)."""
        f = self.run_dir / f"{tool}-{node.name}.batch"
        f.write_text(text)
        run_all(node, [[tool, "-batch", str(f)]])

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if self.controller and self.controller.poll() is not None:
                raise TestbedError(
                    f"controller exited (code {self.controller.returncode}): {self.controller_log_tail()}"
                )
            st = self.request("status")
            if st["ready"]:
                return
            if time.monotonic() > deadline:
                raise TestbedError(
                    f"switches not programmed after {self.ready_timeout_s:g} s: {', '.join(st['missing'][:5])}; "
                    "is ovs-vswitchd running? (testbed doctor)"
                )
            time.sleep(0.05)

    # --- operations --------------------------------------------------------------------------
    def request(self, op: str, **fields: object) -> dict:
        assert self.channel, "testbed is not running"
        return self.channel.request(op, **fields)

    def log(self, event: str, **fields: object) -> None:
        """Add a timestamped event to the controller's event log (one timeline for the run)."""
        self.request("log", event=event, fields=fields)

    def state(self) -> dict:
        return self.request("state")

    def circuits(self) -> dict:
        """worker -> ToR it is circuited to now."""
        return self.state()["circuits"]

    def current_paths(self) -> dict:
        """The CNC's paths for the controller's current circuits and failed links."""
        st = self.state()
        by_key = {ln.key: ln for ln in self.model.links}
        circuits = {w: by_key[tuple(k)] for w, k in st["circuit_links"].items()}
        down = [tuple(k) for k in st["down"]]
        return compute_paths(self.model, circuits, down)

    def sync_host_routes(self) -> int:
        """Make every host's routes and static neighbours match the current paths; returns changes."""
        assert self.mn
        new = host_routes(self.model, self.current_paths())
        changed = 0
        for host, routes in new.items():
            old = set(self.routes.get(host, []))
            add = [r for r in routes if r not in old]
            if not add:
                continue
            multi = len(self.model.links_of(host)) > 1
            lines = []
            for r in add:
                if multi:
                    lines.append(f"route replace {r.dst_ip}/32 dev {r.intf}")
                lines.append(f"neigh replace {r.dst_ip} lladdr {r.mac} dev {r.intf} nud permanent")
            self._batch(self.mn.get(host), "ip", "\n".join(lines) + "\n")
            changed += len(add)
        self.routes = new
        return changed

    def reconfigure(self, worker: str, tor: str, dark_ms: float | None = None) -> dict:
        """Move a worker's circuit to another ToR (TC -> CCC -> ECS -> CNC), then the PS routes."""
        return self._apply(self._dark({"worker": worker, "tor": tor}, dark_ms), "reconfigure")

    def set_link(self, a: str, b: str, up: bool, dark_ms: float | None = None) -> dict:
        """Fail or repair the cables between a and b: interfaces down/up, then the controller
        re-circuits (PSNet's TC, through the ECS dark period) and reroutes; then the hosts."""
        assert self.mn
        if not self.model.links_between(a, b):
            raise ValueError(f"no link between {a} and {b}")
        self._link_status(a, b, up)
        return self._apply(self._dark({"a": a, "b": b, "up": up}, dark_ms), "link")

    def _link_status(self, a: str, b: str, up: bool) -> None:
        """Both ends of the cables between a and b down or up: veths as interfaces (Mininet); a
        patch cable, which has none, as its two OpenFlow ports refusing to send and receive."""
        assert self.mn
        links = self.model.links_between(a, b)
        if not any(self.model.is_patch(ln) for ln in links):
            self.mn.configLinkStatus(a, b, "up" if up else "down")
            return
        for ln in links:
            if not self.model.is_patch(ln):
                raise ValueError(f"{a} and {b} are joined by patch and veth cables at once")
            for end in (ln.a, ln.b):
                port = str(ln.port_of(end))
                run_all(
                    self._root_shell(end),
                    [["ovs-ofctl", "-O", "OpenFlow13", "mod-port", end, port, f if up else f"no-{f}"]
                     for f in ("receive", "forward")],
                )  # fmt: skip

    def set_node(self, name: str, up: bool, dark_ms: float | None = None) -> dict:
        """Fail or repair a switch or host as a whole: every cable of it down/up, then as set_link."""
        assert self.mn
        if name not in self.model.nodes:
            raise ValueError(f"no node {name}")
        for other in sorted({ln.other(name) for ln in self.model.links_of(name)}):
            self._link_status(name, other, up)
        return self._apply(self._dark({"name": name, "up": up}, dark_ms), "node")

    def set_rate(self, a: str, b: str, paper_mbps: float) -> float:
        """Change the rate of the cables between a and b (both ends' HTB class); returns the
        emulated Mbit/s. Paper-equivalent rates, as in topology files (the scale divides them)."""
        assert self.mn
        links = self.model.links_between(a, b)
        if not links:
            raise ValueError(f"no link between {a} and {b}")
        if any(self.model.is_patch(ln) for ln in links):
            raise ValueError(
                f"{a}-{b} is an OVS patch cable (patch_cables: true): it has no qdisc to shape; its traffic "
                "is bounded by the cable beside it, or set patch_cables: false in the topology file"
            )
        mbps = self.model.spec.emulated(paper_mbps)
        mtu = self.model.spec.mtu
        for ln in links:
            for end in (ln.a, ln.b):
                node = self.mn.get(end) if self.model.nodes[end].is_host else self._root_shell(end)
                if self._fair_relay(end):  # the NIC's class and every source's ceiling
                    run_all(node, fair_class_cmds(ln.intf(end), mbps, fair_buckets(self._senders), mtu))
                else:
                    run_all(node, [htb_cmds(ln.intf(end), mbps, mtu=mtu)[1]])  # the class line: rate, ceil
        self.log("rate", a=a, b=b, paper_mbps=paper_mbps, mbps=round(mbps, 3))
        return mbps

    @staticmethod
    def _dark(fields: dict, dark_ms: float | None) -> dict:
        return fields if dark_ms is None else {**fields, "dark_ms": dark_ms}

    def _apply(self, fields: dict, op: str) -> dict:
        t0 = time.monotonic()
        reply = self.request(op, **fields)
        changed = self.sync_host_routes()
        self.log("hosts", routes=changed, total_ms=round((time.monotonic() - t0) * 1000, 2))
        return reply

    def host(self, name: str):
        """The Mininet node of a host (run traffic only through it: 10.x exists only inside)."""
        assert self.mn
        return self.mn.get(name)
