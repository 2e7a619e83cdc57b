"""Removing what a cluster run left on its servers: its bridges (tagged with the run id on each
server's own OVS) and its switches' interfaces (veth ends, VXLAN tunnel devices), over the run's
own ssh_config. Used on every exit path (emulation.cluster_net) and by `testbed clean` / the next
run for a run that was killed (emulation.registry), so it needs nothing but the run folder: it
imports nothing of the testbed, which lets the registry call it without an import cycle."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterable
from pathlib import Path

#: the external-ids key a run's bridges carry, here and on every server (emulation.registry uses it)
TAG = "psnet-testbed"
TIMEOUT_S = 60.0


def clean_remote(
    config: Path, servers: Iterable[str], run_id: str, intfs: Iterable[str], bridges: Iterable[str] = ()
) -> list[str]:
    """On each server: delete the run's tagged bridges, the named `bridges` that carry no run's tag
    (a run killed before it tagged them), and the named interfaces that still exist. Returns what
    was removed ("server1: bridge s0", ...); a server that does not answer is skipped (its line
    says so), since a clean-up must not fail."""
    script = (
        f"for b in $(ovs-vsctl --timeout=10 --bare --columns=name find bridge external-ids:{TAG}={run_id}); do "
        'ovs-vsctl --if-exists del-br "$b" && echo "bridge $b"; done; '
        f'for b in {" ".join(sorted(bridges))}; do ovs-vsctl --timeout=10 br-exists "$b" && '
        f'[ -z "$(ovs-vsctl get bridge "$b" external-ids:{TAG} 2>/dev/null)" ] && '
        'ovs-vsctl del-br "$b" && echo "bridge $b"; done; '
        f'for i in {" ".join(sorted(intfs))}; do [ -e "/sys/class/net/$i" ] && ip link del "$i" && '
        'echo "interface $i"; done; true'
    )
    removed = []
    for server in servers:
        try:
            r = subprocess.run(
                # no master left behind; sudo as every remote command of a run (the login need not be root)
                ["ssh", "-F", str(config), "-o", "ControlMaster=no", server, f"sudo -n bash -c {shlex.quote(script)}"],
                capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            removed.append(f"{server}: no answer (left as it was)")
            continue
        if r.returncode == 255:
            removed.append(f"{server}: could not log in (left as it was)")
            continue
        removed += [f"{server}: {line}" for line in r.stdout.splitlines() if line.strip()]
    return removed


__all__ = ["TAG", "clean_remote"]
