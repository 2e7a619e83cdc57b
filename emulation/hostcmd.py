"""The one place commands run inside Mininet nodes: argv lists in, checked results out."""

from __future__ import annotations

import logging
import shlex

LOG = logging.getLogger(__name__)


class CommandError(RuntimeError):
    """A command inside a node failed; the message names the node, command and output."""


def run(node, argv: list[str]) -> str:
    """Run one argv inside `node` (its namespace), raise CommandError if it exits non-zero."""
    return run_all(node, [argv])


def run_all(node, cmds: list[list[str]]) -> str:
    """Run argvs in order inside `node` through its shell in one round trip; stop at a failure."""
    if not cmds:
        return ""
    script = " && ".join(shlex.join(c) for c in cmds)
    out = node.cmd(f"( {script} ) 2>&1; echo __rc=$?")
    body, _, rc = out.rpartition("__rc=")
    if rc.strip() != "0":
        raise CommandError(f"{node.name}: command failed (exit {rc.strip()}): {script[:200]}: {body.strip()[-400:]}")
    LOG.debug("%s: %s", node.name, script)
    return body
