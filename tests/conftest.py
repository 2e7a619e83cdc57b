"""Test tiers: `root` tests run real Mininet/OVS/os-ken. Off CI they skip where the machine
cannot emulate; under CI (CI=true) a missing dependency is a failure, never a skip.

Shared fixtures (pytest finds them by name; never import this module): `bridges` and
`no_leftovers`, both counting only this testbed's bridges (emulation.registry.own_bridges)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"

# A suite started in the background of a non-interactive shell (`scripts/test.sh &`, as some CI
# runners do) inherits SIGINT ignored, and so would every `testbed` process a test starts: the
# Ctrl-C tests (test_remote, test_hardware) would see their SIGINT dropped and the run go on. A
# Python handler here is reset to the default at exec, so the children get SIGINT as a terminal's
# Ctrl-C delivers it.
signal.signal(signal.SIGINT, signal.default_int_handler)


def _emulation_problems() -> list[str]:
    from emulation import doctor

    return doctor.blocking_problems()


#: An emulation test is run once more when it fails (pytest-rerunfailures; the summary line counts
#: it as "rerun"). On two cores, a test that asserts a ratio of measured times or rates (Table 3's
#: order of three schemes' GSTs, a DVF cut seen on the interfaces, a paused ring over RAT) fails
#: now and then on a run's noise: three clean-clone CI runs in a row each failed one such test,
#: a different one each time, each of which passed alone and in the other runs. The assertions
#: stay what the test means; a real fault fails both attempts. Unit tests are never re-run.
EMULATION_RERUNS = 1


def pytest_collection_modifyitems(config, items):
    emulations = [item for item in items if item.get_closest_marker("root")]
    if not emulations:
        return
    for item in emulations:
        if not item.get_closest_marker("flaky"):
            item.add_marker(pytest.mark.flaky(reruns=EMULATION_RERUNS))
    problems = _emulation_problems()
    if not problems:
        return
    if IN_CI:
        raise pytest.UsageError(f"CI cannot emulate: {problems[0]} (scripts/setup.sh installs everything)")
    skip = pytest.mark.skip(reason=f"cannot emulate here: {problems[0]}")
    for item in emulations:
        item.add_marker(skip)


@pytest.fixture
def bridges() -> Callable[[], list[str]]:
    """A function listing this testbed's OVS bridges at the moment it is called (call it as often
    as needed): tagged with a run id or recorded by a run folder. A bridge the machine has for
    anything else is not the tests' business."""
    from emulation import registry

    return registry.own_bridges


@pytest.fixture
def no_leftovers():
    """Asserts that a test left no OVS bridge of this testbed, no controller process and no
    process of a run behind (bridges of the machine's own, not made by a run, do not count).

    Checked while holding the emulator lock (queueing like a run, PSNET_LOCK_WAIT_S): no run is
    up then, so whatever is there is left over, and a run of another process that took the lock
    as soon as this test let it go is not mistaken for a leftover of this one."""
    import psutil

    from emulation import registry

    yield
    lock = registry.acquire_emulator(float(os.environ.get("PSNET_LOCK_WAIT_S", "0")))
    try:
        assert registry.own_bridges() == [], f"bridges left behind: {registry.own_bridges()}"
        ps = subprocess.run(["pgrep", "-f", "controller.launch"], capture_output=True, text=True).stdout.split()
        assert ps == [], f"controller processes left behind: {ps}"
        # a process with a run's id that is this test's, or an orphan (its owner killed); not one a
        # live process of another session keeps (a fork server of an older checkout carries the id)
        mine = {c.pid for c in psutil.Process().children(recursive=True)}
        runs = []
        for p in psutil.process_iter(["pid", "ppid", "name"]):
            try:
                if (p.pid in mine or p.info["ppid"] == 1) and registry.RUN_ENV in p.environ():
                    runs.append(f"{p.pid} {p.info['name']} (run {p.environ()[registry.RUN_ENV]})")
            except psutil.Error:
                continue
        assert runs == [], f"processes of a run left behind: {runs}"
    finally:
        registry.release_emulator(lock)
