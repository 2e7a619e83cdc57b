"""Start the controller process: os-ken apps on 127.0.0.1 (os-ken >= 4 has no osken-manager).

    python -m controller.launch --topology FILE --ofp-tcp-listen-port P --channel-port C [--kind-plugin M:C]

The testbed starts this as its own process (recorded PID), so a crash of the controller cannot
take the emulation down with it, and the testbed can always stop it. A topology of a kind that is
not shipped (topologies.kinds.plugin_ref: a test's toy kind) is imported and registered here
before the apps start, so the fabric can rebuild its network and the CNC knows its roles.
"""

from __future__ import annotations

import logging
import sys

from os_ken import cfg
from os_ken.base.app_manager import AppManager

import controller.fabric  # noqa: F401  (registers --topology, --channel-port, --event-log, --kind-plugin)
from topologies import kinds

APPS = ["controller.ecs", "controller.cnc", "controller.channel"]


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    cfg.CONF(args + ["--ofp-listen-host", "127.0.0.1"], project="psnet-testbed")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for ref in cfg.CONF.kind_plugin:
        kinds.load_plugin(ref)
    AppManager.run_apps(APPS)


if __name__ == "__main__":
    main()
