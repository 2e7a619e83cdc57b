"""`testbed`: the command line. Every failure a user can cause ends in one line, never a traceback.

testbed doctor                  what this machine has and lacks
testbed clean [--all]           remove leftovers of crashed runs (only this testbed's)
testbed topo show FILE          nodes, links, rates, addresses, circuit map, PNG drawing
testbed topo check FILE         build, route, measure; table of verdicts; exit 1 on a FAIL
testbed topo up FILE            bring it up and drop into Mininet's CLI
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from controller.channel import ChannelError
from controller.tc import CircuitError
from testbed.runner import CommandError
from topologies.schema import TopologyError

LOG = logging.getLogger("testbed")
USER_ERRORS = (TopologyError, CircuitError, ChannelError, CommandError, FileNotFoundError)


def cmd_doctor(_args: argparse.Namespace) -> int:
    from testbed import doctor

    bad = 0
    for c in doctor.checks():
        mark = "ok  " if c.ok else ("FAIL" if c.blocking else "note")
        bad += (not c.ok) and c.blocking
        print(f"{mark}  {c.name:24s} {c.detail}")
    print("ready to emulate" if not bad else f"{bad} blocking problem(s): fix them, then run testbed doctor again")
    return 1 if bad else 0


def cmd_clean(args: argparse.Namespace) -> int:
    from testbed import registry

    removed = registry.clean(include_live=args.all)
    for r in removed:
        print(f"removed {r}")
    print(f"clean: {len(removed)} item(s) removed" if removed else "clean: nothing of this testbed was left over")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from testbed.show import describe, draw
    from topologies.build import load_network

    net = load_network(args.file)
    print(describe(net))
    png = Path(args.png) if args.png else Path("results") / "topologies" / f"{net.name}.png"
    if args.png != "":
        draw(net, png)
        print(f"drawing: {png}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from testbed.check import format_rows, run_checks
    from testbed.net import Testbed

    with Testbed(args.file) as tb:
        rows = run_checks(tb, iperf_s=args.iperf_seconds)
    print(format_rows(rows))
    failed = sum(not r.ok for r in rows)
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


def cmd_up(args: argparse.Namespace) -> int:
    from testbed.mncli import TestbedCLI
    from testbed.net import Testbed

    with Testbed(args.file) as tb:
        print(f"{tb.model.name}: up in {tb.timings['bring_up_s']:.2f} s; extra commands: circuits, ecs, fail, repair")
        TestbedCLI(tb.mn, testbed=tb)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="testbed", description="PSNet/FatTree/BCube emulation testbed")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check this machine").set_defaults(func=cmd_doctor)
    c = sub.add_parser("clean", help="remove leftovers of crashed runs")
    c.add_argument("--all", action="store_true", help="also runs whose owner process is alive")
    c.set_defaults(func=cmd_clean)
    topo = sub.add_parser("topo", help="topology files").add_subparsers(dest="topo_command", required=True)
    s = topo.add_parser("show", help="describe a topology file (no root needed)")
    s.add_argument("file")
    s.add_argument("--png", default=None, help="where to draw it (default results/topologies/NAME.png; '' = none)")
    s.set_defaults(func=cmd_show)
    k = topo.add_parser("check", help="bring up, route, measure, print verdicts")
    k.add_argument("file")
    k.add_argument("--iperf-seconds", type=float, default=3.0, help="length of the shaping probe (0 = skip)")
    k.set_defaults(func=cmd_check)
    u = topo.add_parser("up", help="bring up and open Mininet's CLI")
    u.add_argument("file")
    u.set_defaults(func=cmd_up)
    return p


def _terminate(_sig: int, _frame: object) -> None:
    raise KeyboardInterrupt  # so `with Testbed` unwinds and tears down on SIGTERM too


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.func(args)
    except USER_ERRORS as err:
        print(f"testbed: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("testbed: interrupted; everything was torn down", file=sys.stderr)
        return 130
    except Exception as err:  # TestbedError and friends: one line, details with -v
        if args.verbose:
            raise
        print(f"testbed: {type(err).__name__}: {err} (run with -v for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
