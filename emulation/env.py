"""The one rule for proxy variables: processes of the emulation run without them.

gRPC (TensorFlow's PS transport) and loopback clients honour *_proxy variables (http_proxy,
grpc_proxy, no_proxy, in either case), which would send emulated or loopback traffic to a proxy.
The testbed starts the controller and the jobs with a clean environment, and a job scrubs its
own again before TensorFlow is imported (it may be started by hand). Only the standard library
here: `python -m tfjob.psjob` imports it inside the hosts.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping


def scrub_proxy_env(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Remove every *_proxy variable (any case) from `environ` (default os.environ); returns the
    names removed, sorted."""
    env = os.environ if environ is None else environ
    removed = sorted(k for k in env if k.lower().endswith("_proxy"))
    for key in removed:
        del env[key]
    return removed


def clean_env() -> dict[str, str]:
    """A copy of this process's environment without proxy variables, for the processes it starts."""
    env = dict(os.environ)
    scrub_proxy_env(env)
    return env
