"""The `testbed` command as users run it: real processes, real exit codes, real clean-up."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.summary import summary_of

TESTBED = [sys.executable, "-m", "testbed.cli"]
ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*TESTBED, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_show_prints_model_and_draws(tmp_path):
    png = tmp_path / "t.png"
    r = run("topo", "show", "topologies/psnet-testbed.yaml", "--png", str(png))
    assert r.returncode == 0, r.stderr
    assert "w1_3_2     worker       10.1.3.2" in r.stdout
    assert "module 1: worker(2,2,2)" in r.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("kind: psnet\ntors: 0\nps: 2\nworkers: 6\nworker_mbps: 100\n", "tors"),
        ("kind: fattree\nk: 5\nworkers: [1]\nworker_mbps: 100\n", "k"),
        ("kind: psnet\ntors: 3\nps: 1\nworkers: 6\nworker_mbsp: 100\n", "worker_mbsp"),
        ("kind: dragonfly\n", "kind"),
        ("kind: [psnet\n", "not valid YAML"),
    ],
)
def test_bad_file_is_one_line_naming_file_and_field(tmp_path, body, field):
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    r = run("topo", "show", str(f), "--png", "")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(f) in r.stderr and field in r.stderr


TOPO_ABS = ROOT / "topologies" / "psnet-testbed.yaml"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (f"topology: {TOPO_ABS}\njob: {{model: nosuch}}\n", "job.model"),
        ("topology: nowhere.yaml\njob: {model: tiny}\n", "topology: nowhere.yaml not found"),
        (f"topology: {TOPO_ABS}\njobs: [{{name: a, model: tiny, workers: [ps1_1]}}]\n", "jobs[a].workers: ps1_1"),
        (
            f"topology: {TOPO_ABS}\njob: {{model: tiny}}\n"
            "timeline: [{at_s: 1, action: link_down, link: [t1_1, t1_2]}]\n",
            "timeline[0].link: no cable between t1_1 and t1_2",
        ),
    ],
)
def test_bad_experiment_or_timeline_is_one_line_before_anything_runs(tmp_path, body, field):
    """Experiment and timeline errors (ExperimentError, TimelineError) print like topology errors."""
    f = tmp_path / "bad-exp.yaml"
    f.write_text(body)
    r = run("run", str(f), "--no-progress")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(f) in r.stderr and field in r.stderr


def test_unknown_figure_is_one_line():
    r = run("replay", "fig99")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "fig99: no such figure; figures: fig1" in r.stderr


@pytest.mark.root
def test_doctor_passes_here():
    r = run("doctor")
    assert r.returncode == 0, r.stdout
    assert "ready to emulate" in r.stdout
    assert "sudo" not in r.stdout  # "as root": a root shell may have no sudo


@pytest.mark.root
def test_topo_check_passes_on_the_psnet_prototype(no_leftovers):
    r = run("topo", "check", "topologies/psnet-testbed.yaml", "--iperf-seconds", "2", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout
    assert "2 (ECS+ToR)" in r.stdout and "PS NIC" in r.stdout and "shaping" in r.stdout


@pytest.mark.root
def test_sigterm_tears_down(no_leftovers, bridges):
    p = subprocess.Popen(
        [*TESTBED, "topo", "check", "topologies/fattree-testbed.yaml"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    from emulation import registry

    def built() -> bool:  # a bridge of this run: another emulation's would not do (it says so when nothing was)
        return any(f"(pid {p.pid}," in registry.bridge_owner(b) for b in bridges())

    deadline = time.monotonic() + float(os.environ.get("PSNET_LOCK_WAIT_S", "0")) + 60
    while not built() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.endswith("testbed: interrupted by SIGTERM; everything was torn down\n"), err


@pytest.mark.root
def test_sighup_tears_down_like_sigterm(no_leftovers, bridges):
    """A closed SSH session (the common end of a run on a VM) sends SIGHUP, from the kernel and
    again from the login shell: the first unwinds and tears down, the second does not cut the
    teardown short, and the last line says what happened."""
    from emulation import registry

    p = subprocess.Popen(
        [*TESTBED, "topo", "up", "topologies/leafspine-2rack.yaml"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + float(os.environ.get("PSNET_LOCK_WAIT_S", "0")) + 60
    line = ""
    while "up; press Ctrl-C" not in line and time.monotonic() < deadline and p.poll() is None:
        line = p.stdout.readline()
    assert any(f"(pid {p.pid}," in registry.bridge_owner(b) for b in bridges()), line
    p.send_signal(signal.SIGHUP)
    time.sleep(0.3)  # inside the teardown by now
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.endswith(
        "testbed: interrupted by SIGHUP: its terminal or SSH session closed; everything was torn down\n"
    ), err
    assert bridges() == []


@pytest.mark.root
def test_clean_removes_what_a_killed_run_left(no_leftovers, bridges):
    code = (
        "from emulation.net import Testbed\nimport time\n"
        "with Testbed('topologies/psnet-testbed.yaml'):\n    print('up', flush=True); time.sleep(600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert "ecs1" in bridges()  # a killed run leaves its network behind...
    r = run("clean")
    assert r.returncode == 0
    assert "bridge ecs1" in r.stdout and "controller process" in r.stdout
    hosts = subprocess.run(["pgrep", "-f", "mininet:"], capture_output=True, text=True).stdout.split()
    assert hosts == []  # ...and clean removes it all (no_leftovers checks bridges and controller)


@pytest.mark.root
def test_mininet_mn_builds_the_model_topology(no_leftovers):
    """Mininet's own `mn` takes the Topo (one model): it builds every node and cable of the file."""
    from emulation import registry

    lock = registry.acquire_emulator(1800)  # `mn` knows nothing of the testbed's lock: take it here
    p = subprocess.Popen(
        [
            sys.executable,
            "/usr/bin/mn",
            "--custom",
            "topologies/mininet_topo.py",
            "--topo",
            "model,topologies/psnet-1tor.yaml",
            "--switch",
            "ovs,datapath=user",
            "--controller",
            "none",
            "--test",
            "none",
        ],  # build, start, stop (no waiting for a controller)
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:  # kill mn and the node shells it started, so the pipes close
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for br in ("ecs1", "sn1", "t1_1"):  # mn cleans up only on success
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", br], check=False)
        registry.release_emulator(lock)
    assert p.returncode == 0, err
    assert "*** Adding hosts:\nps1_1 w1_1_1 w1_1_2" in err
    assert "(w1_1_1, ecs1) (w1_1_2, ecs1)" in err and "*** Stopping 3 switches" in err


# --- conventions: global options, version, exit codes, paths, help -----------------------------


def run_in(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI of this checkout started from another directory (PYTHONPATH: this checkout's code)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*TESTBED, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.mark.parametrize("where", [("-v", "--strict"), ("--strict",), ()])
def test_global_options_go_after_the_subcommand_too(where):
    """`testbed run X -v` was "unrecognized arguments", while errors said "run with -v"."""
    r = run("run", "nosuch.yaml", *where)
    assert r.returncode == 2, r.stderr
    assert r.stderr == "testbed: nosuch.yaml: cannot read the file (No such file or directory); check the path\n"
    r = run("-v", "topo", "show", "topologies/psnet-1tor.yaml", "--png", "", *where)
    assert r.returncode == 0 and "psnet-1tor" in r.stdout, r.stderr
    r = run("topo", "-v", "show", "topologies/psnet-1tor.yaml", "--png", "")
    assert r.returncode == 0, r.stderr


def test_verbose_after_the_subcommand_turns_on_debug_logging():
    """-v after the command reaches the logging set-up: the calibration cache's DEBUG line."""
    bct = ("bct", "topologies/psnet-testbed.yaml", "--model", "tiny")
    quiet = run(*bct, timeout=300)  # calibrates once on a fresh machine (TensorFlow, ~15 s), then cached
    assert quiet.returncode == 0 and "DEBUG" not in quiet.stderr, quiet.stderr
    loud = run(*bct, "-v")
    assert loud.returncode == 0, loud.stderr
    assert "DEBUG tfjob.calibrate: calibration cache hit tiny@" in loud.stderr, loud.stderr


def test_version():
    r = run("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("testbed 0.1.0") and f"at {ROOT}" in r.stdout, r.stdout


def test_help_documents_exit_codes_and_the_path_rule():
    r = run("--help")
    assert r.returncode == 0
    for line in [
        "exit codes:",
        "  0    done",
        "  1    the run failed",
        "  2    usage or input",
        "  3    with --strict",
    ]:
        assert line in r.stdout, line
    assert "paths: a FILE argument is read from the current directory or, when it is not there, from" in r.stdout


def test_the_module_docstring_lists_every_subcommand():
    from testbed import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = []
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        names += [f"{name} {n}" for n in nested[0].choices] if nested else [name]
    assert len(names) == 15  # + `run --hosts`: 16 lines
    listed = [ln.split("  ")[0] for ln in cli.__doc__.splitlines() if ln.startswith("testbed ")]
    for name in names:
        assert any(f"testbed {name}" in ln for ln in listed), name
    assert any("--hosts" in ln for ln in listed)


def test_a_file_argument_is_found_from_any_directory_and_drawings_go_to_the_checkout(tmp_path):
    """`topo show` once read relative paths and wrote its drawing relative to the current
    directory while runs wrote to the checkout's results/: one rule for every command now."""
    r = run_in(tmp_path, "topo", "show", "topologies/psnet-1tor.yaml")
    assert r.returncode == 0, r.stderr
    assert f"drawing: {ROOT / 'results' / 'topologies' / 'psnet-1tor.png'}" in r.stdout
    assert not (tmp_path / "results").exists()
    r = run_in(tmp_path, "bct", "topologies/psnet-testbed.yaml", "--p-w", "10", "--p-s", "1e8")
    assert r.returncode == 0 and "psnet-testbed: vgg16" in r.stdout, r.stderr
    (tmp_path / "topologies").mkdir()  # a file of that name here: the current directory wins
    (tmp_path / "topologies" / "psnet-testbed.yaml").write_text("kind: fattree\nk: 4\nworker_mbps: 100\n")
    r = run_in(tmp_path, "topo", "show", "topologies/psnet-testbed.yaml", "--png", "")
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        r.stderr == "testbed: topologies/psnet-testbed.yaml: workers: required field is missing; add it (see "
        "topologies/README.md)\n"
    )


def test_bct_takes_every_model_a_job_can_name():
    r = run("bct", "topologies/psnet-testbed.yaml", "--model", "mnist", "--p-w", "10", "--p-s", "1e8")
    assert r.returncode == 0, r.stderr
    assert "psnet-testbed: mnist, S = 4.0 MB" in r.stdout


def test_ctrl_c_before_anything_was_built_says_so(tmp_path):
    """A FIFO with no writer: `topo show` blocks reading it, and nothing has been built."""
    fifo = tmp_path / "topo.yaml"
    os.mkfifo(fifo)
    p = subprocess.Popen([*TESTBED, "topo", "show", str(fifo)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    wchan = Path(f"/proc/{p.pid}/wchan")
    deadline = time.monotonic() + 120  # past the imports (slow on a loaded machine), blocked opening the FIFO
    while time.monotonic() < deadline and p.poll() is None and wchan.read_text() != "wait_for_partner":
        time.sleep(0.1)
    assert p.poll() is None and wchan.read_text() == "wait_for_partner", "testbed never blocked on the FIFO"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert err == "testbed: interrupted (nothing had been built)\n"


def test_strict_turns_a_claim_that_did_not_hold_into_exit_3(tmp_path):
    """The model figure's claims hold (exit 0 with --strict); the exit-code rule on that same
    report.json with one verdict turned (no run can be made to fail fidelity on demand here)."""
    import json

    from testbed import cli

    r = run("replay", "fig6", "--quick", "--strict", "--results", str(tmp_path / "results"), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads((tmp_path / "results" / "fig6-quick" / "report.json").read_text())
    assert rep["claims"] and all(c["verdict"] == "holds" for c in rep["claims"])
    assert cli._report_shortfalls("fig6", tmp_path / "results" / "fig6-quick") == []
    rep["claims"][0]["verdict"] = "does NOT hold"
    (tmp_path / "report.json").write_text(json.dumps(rep))
    short = cli._report_shortfalls("fig6", tmp_path)
    assert short == [f"fig6: claim {rep['claims'][0]['label']!r} does NOT hold"]
    assert cli.strict_code(argparse.Namespace(strict=False), short) == cli.EXIT_OK
    assert cli.strict_code(argparse.Namespace(strict=True), short) == cli.EXIT_NOT_FAITHFUL == 3
    summary = {
        "name": "x",
        "complete": True,
        "fidelity": {"faithful": False, "reason": "ovs-vswitchd dropped 3 packets"},
    }
    assert cli._run_shortfalls(summary_of(summary)) == ["x: NOT faithful: ovs-vswitchd dropped 3 packets"]
    hardware = summary_of({"name": "hw", "complete": True, "fidelity": {"faithful": None}})
    assert cli._run_shortfalls(hardware) == []  # hardware: no verdict


@pytest.mark.root
@pytest.mark.tf
def test_a_run_that_fails_exits_1_and_draws_no_bar_into_a_pipe(tmp_path, no_leftovers):
    """A job past its deadline is a failed run (exit 1, one line), not a usage error (2, as
    before); its stderr is a pipe, so no progress bar was drawn into it."""
    exp = tmp_path / "late.yaml"
    exp.write_text(
        f"name: cli-late\ntopology: {ROOT / 'topologies' / 'psnet-1tor.yaml'}\n"
        "job: {model: tiny, iterations: 100000, deadline_s: 2}\n"
    )
    r = run("run", str(exp), "--results", str(tmp_path / "results"), timeout=900)
    assert r.returncode == 1, r.stdout + r.stderr
    last = r.stderr.splitlines()[-1]
    assert last.startswith("testbed: ") and "deadline" in last, r.stderr
    assert "\r" not in r.stderr and "steps:" not in r.stderr, r.stderr


def in_a_terminal(argv: list[str], timeout: float = 900) -> tuple[int, str]:
    """Run `argv` with stdout and stderr on a pseudo-terminal of 120 x 40 (a pty without a size
    makes tqdm draw empty bars); returns (exit code, everything it wrote)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=ROOT)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last writer is gone
                    break
                if not data:
                    break
                out += data
            elif p.poll() is not None:
                break
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        os.close(master)
    return p.returncode, out.decode(errors="replace")


@pytest.mark.root
@pytest.mark.tf
def test_log_lines_print_above_the_progress_bar_in_a_terminal(tmp_path, no_leftovers):
    """In a terminal the step bar is drawn, and the timeline's INFO lines (runs.inject) start a
    line of their own: tqdm clears the bar, prints the line, redraws the bar. Before, the line
    was written straight after the bar's text ("cli-bar steps: 25%|...| 3/12 [...]INFO ...")."""
    exp = tmp_path / "bar.yaml"
    exp.write_text(
        f"name: cli-bar\ntopology: {ROOT / 'topologies' / 'psnet-testbed.yaml'}\n"
        "job: {model: tiny, iterations: 12, warmup: 1}\ntimeline:\n"
        "  - {at_step: 3, action: set_rate, link: [ps1_1, t1_1], mbps: 1000}\n"
        "  - {at_step: 6, action: set_rate, link: [ps1_1, t1_1], mbps: 1000}\n"
    )
    code, out = in_a_terminal([*TESTBED, "run", str(exp), "--results", str(tmp_path / "results")])
    assert code == 0, out[-3000:]
    assert "cli-bar steps:" in out, out[-3000:]  # a terminal: the bar is on
    pieces = [p for p in re.split(r"[\r\n]", out) if "INFO runs.inject" in p]
    assert len(pieces) == 2, out[-3000:]
    assert all(p.startswith("INFO runs.inject: t0+") for p in pieces), pieces
