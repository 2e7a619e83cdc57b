"""Which PS holds each variable of a model: largest first, cutting a layer that is too big.

The paper's equations (Eqs. 1-7) assume every PS holds S/P bytes. TF places whole variables, and
VGG-16's 4096x4096 kernel is half of the model, so TF's round robin, or a greedy fill in creation
order (what tf.contrib's GreedyLoadBalancingStrategy did), leaves one of two PSs with ~3/4 of
the bytes. `plan_placement` does better:

1. LPT (longest processing time first): the trainable variables sorted by bytes, largest first,
   each on the PS holding the fewest bytes so far (ties: the lowest task). With many variables
   small beside S/P it lands within a few per cent of S/P on every PS.
2. While a PS is more than `tolerance` away from S/P, the conv or dense layer with the largest
   piece is cut into P pieces (then 2P, 3P...: dnn._Ops builds narrower layers side by side,
   the same function with the same bytes), and LPT runs again. That is the partitioning TF 1
   did with fixed_size_partitioner, for Keras layers.

Everything comes from the model's shapes (tfjob.dnn), so every worker of a job computes
the same plan without TensorFlow, and tests check it without building anything. Variables that
are not trainable (batch-norm moving statistics: never pushed or pulled by the optimizer) stay
with their layer's first trainable variable and count for nothing.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tfjob import dnn

LOG = logging.getLogger(__name__)

#: every PS within this fraction of S/P (the brief of the paper's equations)
TOLERANCE = 0.05
#: cut rounds before giving up on the tolerance (the best plan seen is used then)
MAX_ROUNDS = 64


@dataclass(frozen=True)
class Placement:
    """A model's variables (creation order, after cutting) and the PS task of each."""

    model: str
    width: float
    num_ps: int
    splits: dict[int, int]  # layer index -> pieces (dnn._Ops)
    variables: tuple[dnn.Variable, ...]
    tasks: tuple[int, ...]

    def bytes_per_ps(self) -> list[int]:
        """Trainable bytes each PS task holds (what every step pushes to it and pulls from it)."""
        held = [0] * self.num_ps
        for v, t in zip(self.variables, self.tasks, strict=True):
            if v.trainable:
                held[t] += v.nbytes
        return held

    def deviation(self) -> float:
        """Largest |bytes on a PS - S/P| as a fraction of S/P."""
        held = self.bytes_per_ps()
        mean = sum(held) / self.num_ps
        return max(abs(b - mean) for b in held) / mean


def lpt(sizes: Sequence[int], bins: int) -> list[int]:
    """Bin of each size: largest first onto the least-filled bin (ties: lowest index)."""
    heap = [(0, b) for b in range(bins)]
    out = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        load, b = heapq.heappop(heap)
        out[i] = b
        heapq.heappush(heap, (load + sizes[i], b))
    return out


def _place(model: str, width: float, num_ps: int, splits: dict[int, int]) -> Placement:
    variables = dnn.get_model(model).variables(width, splits)
    trainable = [i for i, v in enumerate(variables) if v.trainable]
    tasks = [0] * len(variables)
    for i, t in zip(trainable, lpt([variables[i].nbytes for i in trainable], num_ps), strict=True):
        tasks[i] = t
    first_of_layer: dict[int, int] = {}
    for i in trainable:
        first_of_layer.setdefault(variables[i].layer, tasks[i])
    for i, v in enumerate(variables):
        if not v.trainable:
            tasks[i] = first_of_layer.get(v.layer, 0)
    return Placement(model, width, num_ps, dict(splits), tuple(variables), tuple(tasks))


def plan_placement(model: str, width: float, num_ps: int, tolerance: float = TOLERANCE) -> Placement:
    """LPT placement of `model` at `width` over `num_ps` PSs, cutting layers until every PS is
    within `tolerance` of S/P (or no cut helps: the closest plan then, with a warning)."""
    if num_ps < 1:
        raise ValueError(f"num_ps must be >= 1, got {num_ps}")
    channels = dnn.get_model(model).splittable(width)
    splits: dict[int, int] = {}
    best: Placement | None = None
    for _ in range(MAX_ROUNDS):
        p = _place(model, width, num_ps, splits)
        if best is None or p.deviation() < best.deviation():
            best = p
        if p.deviation() <= tolerance:
            return p
        cuttable = [v for v in p.variables if v.trainable and splits.get(v.layer, 1) < channels.get(v.layer, 1)]
        if not cuttable:
            break
        layer = max(cuttable, key=lambda v: v.nbytes).layer
        pieces = splits.get(layer, 1)
        splits[layer] = min(channels[layer], num_ps if pieces == 1 else pieces + num_ps)
    assert best is not None
    LOG.warning(
        "%s at width %g over %d PSs: the closest placement is %.1f%% from S/P (tolerance %.0f%%)",
        model,
        width,
        num_ps,
        100 * best.deviation(),
        100 * tolerance,
    )
    return best
