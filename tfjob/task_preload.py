"""What the fork server (tfjob.forkserver) imports once for all the psjob tasks it forks:
TensorFlow, Keras and the task's own code, so a task starts at its graph build. Proxy variables
go first, as in psjob.main: gRPC reads them (see tfjob.psjob's pitfalls)."""

from emulation.env import scrub_proxy_env

scrub_proxy_env()

import keras  # noqa: E402, F401
import tensorflow  # noqa: E402
import tensorflow.compat.v1  # noqa: E402, F401

from tfjob import psjob  # noqa: E402, F401
