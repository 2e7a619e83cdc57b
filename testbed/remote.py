"""`testbed remote HOST ... COMMAND`: run a testbed command on another machine (the testbed VM, a
lab server) over SSH, with exactly the files it needs pushed there and its results fetched back.

    testbed remote HOST [--user U] [--key K] [--port P] [--path DIR] [--accept-new-host-key] COMMAND
    COMMAND: run EXP | replay FIG|all | topo check FILE | topo show FILE | doctor | setup

What moves (paths on the remote side are inside its checkout, DIR, default ~/psnet-testbed):

- run EXP: pushes EXP (its `topology` pointed at the copy) and its topology into
  results/remote-inputs/NAME/, runs `testbed run`, fetches results/NAME/.
- replay FIG|all: pushes workloads/figures/FIG.yaml and the topologies/ files its points name
  (with --quick, its quick points'; they replace the remote checkout's), runs `testbed replay`,
  fetches results/FIG/ (FIG-quick/).
- topo check|show FILE: pushes FILE into results/remote-inputs/topologies/; show fetches its
  drawing results/topologies/NAME.png.
- doctor: nothing moves. setup: runs scripts/setup.sh in the checkout (as root: --sudo).

Fetched folders land in --results (default: this checkout's results/), merged over what is there.
The files are checked here first (a bad file is the same one line as locally, before any
connection). Only the options this module knows are forwarded, each rebuilt from its parsed value.
The command runs as `.venv/bin/python -m testbed.cli` from the checkout, so the checkout's code
runs whatever its venv's editable install points at.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from replays.figure import FIGURES, REPO, TOPOLOGIES, group_names, load_figure
from servers.ssh import (
    Endpoint,
    SSHError,
    connect,
    exists,
    get_tree,
    open_sftp,
    put_bytes,
    remote_home,
    run_streamed,
)
from topologies.schema import InputError, check_name, is_safe_name, read_yaml

LOG = logging.getLogger(__name__)
#: the remote checkout when --path is not given (relative to the login directory)
DEFAULT_PATH = "psnet-testbed"
#: where pushed experiment and topology files go in the remote checkout (results/*/ is git-ignored)
INPUTS = "results/remote-inputs"
#: testbed commands `testbed remote` runs (plus setup, which runs scripts/setup.sh)
COMMANDS = ("run", "replay", "topo", "doctor", "setup")


class RemoteError(SSHError):
    """The remote machine cannot run the command (no checkout, not set up); one line."""


@dataclass
class Plan:
    """One remote command: the files to push (contents, path in the checkout), the argv to run
    there, and what to fetch (paths under the checkout's results/)."""

    argv: list[str]
    push: list[tuple[bytes, str]] = field(default_factory=list)
    fetch: list[str] = field(default_factory=list)
    needs_venv: bool = True


def plan(ns: argparse.Namespace) -> Plan:
    """What `ns` (a parsed testbed command, see testbed.cli) needs on the remote side."""
    verbose = ["-v"] if getattr(ns, "verbose", False) else []  # the global options, forwarded
    verbose += ["--strict"] if getattr(ns, "strict", False) else []
    if ns.command == "setup":
        return Plan(argv=["bash", "scripts/setup.sh"], needs_venv=False)
    if ns.command == "doctor":
        return Plan(argv=[*verbose, "doctor"])
    if ns.command == "run":
        if getattr(ns, "hosts", None):  # not forwarded: the remote run would be emulated instead
            raise InputError(
                f"remote run: --hosts {ns.hosts} is not run remotely (the inventory names this machine's key "
                "files); run `testbed run EXPERIMENT --hosts INVENTORY` on a machine that reaches the servers"
            )
        p = _plan_run(Path(ns.experiment))
        p.argv = [*verbose, *p.argv, *(["--no-progress"] if ns.no_progress else []), *_no_budget(ns)]
        return p
    if ns.command == "replay":
        return _plan_replay(ns, verbose)
    if ns.command == "topo" and ns.topo_command in ("check", "show"):
        return _plan_topo(ns, verbose)
    raise InputError(
        f"remote: {ns.command} {getattr(ns, 'topo_command', '')} is not run remotely; use one of "
        "run, replay, topo check, topo show, doctor, setup"
    )


def _no_budget(ns: argparse.Namespace) -> list[str]:
    """`--no-budget`, forwarded: the budget is the remote machine's, checked there."""
    return ["--no-budget"] if getattr(ns, "no_budget", False) else []


def _plan_run(path: Path) -> Plan:
    from workloads.experiment import load_experiment

    exp, _topo, topo_path = load_experiment(path)  # a bad file: the local one-line error, nothing sent
    data = read_yaml(path)
    assert isinstance(data, dict)  # load_experiment refused anything else
    topo_name = check_name(topo_path.name)
    stage = f"{INPUTS}/{exp.name}"
    staged = {**data, "name": exp.name, "topology": f"topology/{topo_name}"}
    return Plan(
        argv=["run", f"{stage}/{exp.name}.yaml"],
        push=[
            (yaml.safe_dump(staged, sort_keys=False).encode(), f"{stage}/{exp.name}.yaml"),
            (topo_path.read_bytes(), f"{stage}/topology/{topo_name}"),
        ],
        fetch=[exp.name],
    )


def _plan_replay(ns: argparse.Namespace, verbose: list[str]) -> Plan:
    from replays.sweep import points_to_run

    group = group_names(ns.figure, "emulated")
    names = group if group is not None else [ns.figure]
    push: list[tuple[bytes, str]] = []
    topologies: set[str] = set()
    for name in names:
        fig = load_figure(name)  # unknown name or bad file: one line, before connecting
        push.append(((FIGURES / f"{name}.yaml").read_bytes(), f"workloads/figures/{name}.yaml"))
        topologies |= {p.topology for p in points_to_run(fig, ns.quick)}  # --quick: its points only
    for t in sorted(topologies):
        parts = PurePosixPath(t).parts
        if not parts or not all(is_safe_name(part) for part in parts):
            raise InputError(f"{t}: a figure point's topology must be a file in topologies/ (plain names only)")
        push.append(((TOPOLOGIES / t).read_bytes(), f"topologies/{t}"))
    argv = [*verbose, "replay", ns.figure]
    argv += ["--quick"] if ns.quick else []
    argv += ["--repeat", str(ns.repeat)] if ns.repeat else []
    argv += ["--fresh"] if ns.fresh else []
    argv += ["--report-only"] if ns.report_only else []
    argv += ["--no-progress"] if ns.no_progress else []
    argv += _no_budget(ns)
    return Plan(argv=argv, push=push, fetch=[f"{n}-quick" if ns.quick else n for n in names])


def _plan_topo(ns: argparse.Namespace, verbose: list[str]) -> Plan:
    from topologies.build import load_network

    local = Path(ns.file)
    net = load_network(local)  # a bad file: the local one-line error
    remote = f"{INPUTS}/topologies/{check_name(local.name)}"
    push = [(local.read_bytes(), remote)]
    if ns.topo_command == "check":
        argv = [*verbose, "topo", "check", remote, "--iperf-seconds", repr(ns.iperf_seconds), *_no_budget(ns)]
        return Plan(argv=argv, push=push)
    if ns.png not in (None, ""):
        raise InputError(
            f"--png {ns.png}: names a path on the remote machine; leave it out (the drawing is fetched "
            "to results/topologies/) or give --png '' for none"
        )
    fetch = [] if ns.png == "" else [f"topologies/{check_name(net.name)}.png"]
    return Plan(
        argv=[*verbose, "topo", "show", remote, *(["--png", ""] if ns.png == "" else [])], push=push, fetch=fetch
    )


@dataclass(frozen=True)
class Options:
    """How to run on the remote side."""

    path: str | None = None
    sudo: bool = False
    env: tuple[tuple[str, str], ...] = ()
    results: Path = REPO / "results"


def checkout_path(sftp, given: str | None) -> str:
    """The remote checkout: --path (absolute, ~/..., or relative to the login directory), else
    ~/psnet-testbed."""
    home = remote_home(sftp)
    p = given or DEFAULT_PATH
    if p == "~" or p.startswith("~/"):
        p = p[2:]
    return p if p.startswith("/") else str(PurePosixPath(home) / p)


def command_line(root: str, argv: list[str], opts: Options, is_testbed: bool) -> str:
    """The shell line run on the remote side (every part quoted)."""
    env = [f"{k}={v}" for k, v in (("PYTHONUNBUFFERED", "1"), *opts.env)]
    prog = [".venv/bin/python", "-m", "testbed.cli"] if is_testbed else []
    words = [*(["sudo", "-n"] if opts.sudo else []), "env", *env, *prog, *argv]
    return f"cd {shlex.quote(root)} && exec {shlex.join(words)}"


def run_remote(endpoint: Endpoint, p: Plan, opts: Options) -> int:
    """Connect, check the checkout, push, run with live output, fetch; the remote exit status."""
    ep = endpoint.resolved()
    client = connect(ep)
    try:
        sftp = open_sftp(client, ep.host)
        root = checkout_path(sftp, opts.path)
        _check_checkout(sftp, ep.host, root, p.needs_venv)
        for data, rel in p.push:
            put_bytes(sftp, data, f"{root}/{rel}")
        if p.push:
            LOG.info("%s: pushed %s", ep.host, ", ".join(rel for _, rel in p.push))
        is_testbed = p.argv[:2] != ["bash", "scripts/setup.sh"]
        line = command_line(root, p.argv, opts, is_testbed)
        LOG.debug("%s: %s", ep.host, line)
        status, interrupted = run_streamed(
            client,
            line,
            sys.stdout.buffer,
            on_interrupt=lambda: print(
                f"\ntestbed remote: stopping the command on {ep.host} (it tears down); Ctrl-C again drops the "
                "connection",
                file=sys.stderr,
                flush=True,
            ),
        )
        for rel in p.fetch:
            src = f"{root}/results/{rel}"
            if not exists(sftp, src):
                print(f"testbed remote: nothing to fetch: {src} is not on {ep.host}", file=sys.stderr)
                continue
            files, size = get_tree(sftp, src, opts.results / rel)
            print(f"fetched {files} file(s), {size / 1e6:.2f} MB: {opts.results / rel}")
        if interrupted:
            print(f"testbed remote: interrupted; the command on {ep.host} ended (exit {status})", file=sys.stderr)
        return status
    finally:
        client.close()


def _check_checkout(sftp, host: str, root: str, needs_venv: bool) -> None:
    if not exists(sftp, f"{root}/testbed/cli.py") or not exists(sftp, f"{root}/scripts/setup.sh"):
        raise RemoteError(
            f"{host}: no psnet-testbed checkout at {root}; copy or clone the repository there (or give --path), "
            f"then run `testbed remote {host} setup`"
        )
    if needs_venv and not exists(sftp, f"{root}/.venv/bin/python"):
        raise RemoteError(
            f"{host}: the testbed at {root} is not set up (no .venv/bin/python); run `testbed remote {host} setup`"
        )


def split_argv(rest: list[str], value_options: set[str]) -> tuple[list[str], list[str]]:
    """`testbed remote HOST` takes its own options before the command: split the words after HOST
    into (remote options, command)."""
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        i += 2 if rest[i] in value_options else 1
    return rest[:i], rest[i:]


def parse_env(items: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise InputError(f"--env {item}: expected NAME=VALUE (NAME a variable name), e.g. PSNET_LOCK_WAIT_S=1800")
        out.append((name, value))
    return tuple(out)
