"""Give a forked process its own TensorFlow random stream: reseed tsl::random::New64's generator.

Why: TensorFlow draws session handles, step ids and the seeds of unseeded random ops from one
process-wide std::mt19937_64 (tsl::random::New64), seeded from /dev/urandom on first use. The
first use comes with the first graph (a `tf.constant` is enough), so a process forked after it
(the fork server's tasks once the server built a worker graph, tfjob.psjob.GraphTemplate)
inherits the generator's state, and its siblings draw the same numbers: two workers then opened
master sessions under the same handle on their PS and one's clean-up cancelled the other's
initialisation (seen here: the chief failing with "RecvFromRemoteAsync is cancelled", the other
workers waiting for it forever; an unseeded tf.random.uniform gave 0.98675394 in both of two
forked children).

TensorFlow has no call to reseed it, and the generator is a function-local static, which no
symbol exports. Its address is read from New64's own code: the first `mov rdi, [rip+disp32]`
(48 8b 3d) loads the generator's pointer and is followed by the call to the engine (e8). Only
that exact shape is trusted (TF 2.21's build, pinned in requirements.txt); otherwise `slot()` is
None and the fork server builds no shared graph, so nothing depends on this.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re

#: std::mt19937_64 in libstdc++: 312 words of state, then the index of the next word
STATE_WORDS = 312
MOV_RDI_RIP = b"\x48\x8b\x3d"
CALL = 0xE8
NEW64 = "_ZN3tsl6random5New64Ev"


def _framework_lib() -> str | None:
    """Path of the loaded libtensorflow_framework (this process imported TensorFlow)."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        for line in f:
            m = re.search(r"(/\S*libtensorflow_framework\.so[.\d]*)$", line.strip())
            if m:
                return m.group(1)
    return None


@functools.cache
def slot() -> int | None:
    """Address of New64's `static std::mt19937_64* rng`, or None where it cannot be found safely."""
    path = _framework_lib()
    if path is None:
        return None
    try:
        fn = ctypes.cast(getattr(ctypes.CDLL(path), NEW64), ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    if not fn:
        return None
    code = ctypes.string_at(fn, 96)
    i = code.find(MOV_RDI_RIP)
    if i < 0 or i + 8 > len(code) or code[i + 7] != CALL:
        return None
    disp = int.from_bytes(code[i + 3 : i + 7], "little", signed=True)
    return fn + i + 7 + disp


def reseed() -> bool:
    """Fresh state from os.urandom for the generator, if it exists already (a generator not yet
    made will seed itself from /dev/urandom on first use). False if it cannot be reached."""
    where = slot()
    if where is None:
        return False
    engine = ctypes.c_void_p.from_address(where).value
    if engine:
        ctypes.memmove(engine, os.urandom(8 * STATE_WORDS), 8 * STATE_WORDS)
        # the index at the end: the next draw regenerates the state from these words
        ctypes.c_size_t.from_address(engine + 8 * STATE_WORDS).value = STATE_WORDS
    return True


def new64() -> int:
    """One draw of tsl::random::New64 (for tests: siblings must draw differently)."""
    path = _framework_lib()
    if path is None:
        raise RuntimeError("TensorFlow is not loaded in this process")
    fn = getattr(ctypes.CDLL(path), NEW64)
    fn.restype = ctypes.c_uint64
    return int(fn())
