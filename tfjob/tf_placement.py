"""Where tf.compat.v1's replica_device_setter puts each variable op: device strategies for the PS job.

Kept apart from tfjob.placement (which plans on shapes alone, without TensorFlow, so unit
tests and the flow model can use it) and from the PS job process itself: these classes are
called by TensorFlow with graph ops while the job builds its graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfjob.placement import Placement


class GreedyLoadBalancingStrategy:
    """`ps_strategy` for replica_device_setter: each PS op goes to the least-loaded PS task
    (PlannedStrategy uses it for the ops outside its plan).

    TF 1.x's tf.contrib.training class of the same name (gone in TF 2). Ties go to the lowest task
    index. Greedy, so the result depends on the order in which variables are created.
    """

    def __init__(self, num_tasks: int, load_fn: Callable[[Any], int]) -> None:
        if num_tasks < 1:
            raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
        self.loads = [0] * num_tasks
        self._load_fn = load_fn

    def __call__(self, op: Any) -> int:
        task = min(range(len(self.loads)), key=self.loads.__getitem__)
        self.loads[task] += self._load_fn(op)
        return task


def _op_shape_dtype(op: Any) -> tuple[Any, Any]:
    """(TensorShape, DType) of the variable (or other single-output op) `op` creates.

    Variable ops (VarHandleOp, VariableV2) carry "shape" and "dtype" attributes: a resource
    variable's output is a scalar handle, so its output shape (what contrib read) says nothing.
    """
    import tensorflow as tf

    try:
        shape = tf.TensorShape(op.get_attr("shape"))
        dtype = tf.dtypes.as_dtype(op.get_attr("dtype"))
    except ValueError:  # no such attributes: the single output
        if len(op.outputs) != 1:
            raise ValueError(f"{op.name}: {len(op.outputs)} outputs, expected one") from None
        shape, dtype = op.outputs[0].shape, op.outputs[0].dtype
    if not shape.is_fully_defined():
        raise ValueError(f"{op.name}: shape {shape} is not fully defined")
    return shape, dtype


def byte_size_load_fn(op: Any) -> int:
    """Bytes of the variable (or other single-output op) `op` creates."""
    shape, dtype = _op_shape_dtype(op)
    return shape.num_elements() * dtype.base_dtype.size


class PlannedStrategy:
    """`ps_strategy` for replica_device_setter that puts the model's variables where a
    tfjob.placement plan says (LPT over the model's shapes, big layers cut).

    replica_device_setter asks once per variable op, in creation order: the global step, then
    the model's variables (the plan's order: each is checked by its shape), then a few scalars of
    SyncReplicasOptimizer. Ops outside the plan go to the least-loaded PS, as the greedy strategy
    does. `check_complete` after building says whether every planned variable was seen.
    """

    def __init__(self, plan: Placement) -> None:
        self.greedy = GreedyLoadBalancingStrategy(plan.num_ps, byte_size_load_fn)
        self._expected = list(zip(plan.variables, plan.tasks, strict=True))
        self._next = 0

    def __call__(self, op: Any) -> int:
        shape, _ = _op_shape_dtype(op)
        if self._next < len(self._expected) and tuple(shape.as_list()) == self._expected[self._next][0].shape:
            var, task = self._expected[self._next]
            self._next += 1
            self.greedy.loads[task] += var.nbytes
            return task
        return self.greedy(op)

    def check_complete(self) -> None:
        """Raise if the model's variables did not come as planned (models.py and Keras disagree)."""
        if self._next != len(self._expected):
            want = self._expected[self._next][0]
            raise RuntimeError(
                f"placement: variable {self._next} of the plan (layer {want.layer}, shape {want.shape}) was never "
                "created; tfjob.dnn' variable list no longer matches the Keras build"
            )
