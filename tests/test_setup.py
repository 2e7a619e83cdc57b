"""scripts/setup.sh says what it changes, finds SimGrid's module for the venv's Python on any
architecture, and neither it nor `testbed doctor` tells a root shell to use sudo. Nothing here
changes the machine: `--list` only prints, the lookup is run on folders made here, and the
refusal is a non-root run that stops before anything."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "scripts" / "setup.sh"


def apt_packages() -> list[str]:
    """The packages the script installs (its apt_pkgs array)."""
    m = re.search(r"^apt_pkgs=\(([^)]*)\)", SETUP.read_text(), re.M)
    assert m
    return m.group(1).split()


def test_list_prints_every_system_change_without_making_any():
    r = subprocess.run(["bash", str(SETUP), "--list"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    listed = r.stdout
    assert listed.startswith("What it changes on this machine")
    for pkg in apt_packages():
        assert re.search(rf"(^|\s){re.escape(pkg)}(\s|$)", listed), pkg
    for change in (
        "openssh-server: Debian's package starts sshd (port 22, every address) and enables it at boot",
        "net.core.wmem_default = 33554432",
        "net.core.rmem_default = 8388608",
        "/etc/sysctl.d/60-psnet-testbed.conf",
        "Open vSwitch started",
        "bind shim",
    ):
        assert change in listed, change
    text = SETUP.read_text()  # each value listed is the one the script sets
    assert (
        "sndbuf=33554432" in text
        and "rcvbuf=8388608" in text
        and "sysctl_conf=/etc/sysctl.d/60-psnet-testbed.conf" in text
    )


@pytest.mark.parametrize(
    ("present", "ext", "found"),
    [
        (["simgrid.cpython-311-aarch64-linux-gnu.so"], ".cpython-311-aarch64-linux-gnu.so", True),
        (["simgrid.cpython-312-x86_64-linux-gnu.so"], ".cpython-312-x86_64-linux-gnu.so", True),
        (["simgrid.cpython-311-x86_64-linux-gnu.so"], ".cpython-311-aarch64-linux-gnu.so", False),
        ([], ".cpython-311-x86_64-linux-gnu.so", False),
    ],
)
def test_simgrids_module_is_found_for_the_venvs_python_not_hard_coded(tmp_path, present, ext, found):
    """Once linked by one fixed name (x86_64, CPython 3.11): another architecture got a broken link."""
    for name in present:
        (tmp_path / name).write_bytes(b"")
    r = subprocess.run(
        ["bash", "-c", f'source "{SETUP}"; find_simgrid "{tmp_path}" "{ext}"'], capture_output=True, text=True
    )
    if found:
        assert r.returncode == 0 and r.stdout == f"{tmp_path}/simgrid{ext}\n", r.stderr
        return
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    if present:
        assert r.stderr == (
            f"setup: {tmp_path} has {present[0]} but the venv's Python loads simgrid{ext}: install a python3-simgrid "
            "built for it\n"
        )
    else:
        assert r.stderr == (
            f"setup: no SimGrid module (simgrid*.so) in {tmp_path}: apt-get install python3-simgrid (the flow model "
            "needs it)\n"
        )


def test_the_venvs_simgrid_link_resolves():
    import sysconfig

    ext = sysconfig.get_config_var("EXT_SUFFIX")
    link = Path(sysconfig.get_paths()["purelib"]) / f"simgrid{ext}"
    assert link.exists(), f"{link}: run scripts/setup.sh"
    r = subprocess.run(
        ["bash", "-c", f'source "{SETUP}"; find_simgrid /usr/lib/python3/dist-packages "{ext}"'],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and Path(r.stdout.strip()).resolve() == link.resolve(), r.stderr


@pytest.mark.skipif(not shutil.which("setpriv"), reason="setpriv (util-linux) is missing")
def test_a_non_root_run_says_as_root_not_sudo():
    r = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", str(SETUP)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1
    assert r.stderr == (
        "setup: run as root: Mininet, Open vSwitch and the system changes listed by scripts/setup.sh --list need it\n"
    )


def test_no_message_of_setup_or_doctor_says_sudo():
    """A root shell (a VM's console, a container) often has no sudo: "as root" is what is meant."""
    from emulation import doctor

    messages = [ln for ln in SETUP.read_text().splitlines() if re.match(r"\s*(log|echo)\b", ln)]
    assert messages and not [ln for ln in messages if "sudo" in ln]
    assert "sudo" not in doctor.SETUP
    assert "sudo" not in Path(doctor.__file__).read_text()
