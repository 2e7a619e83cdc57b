"""One worker graph for every worker of a job (tfjob.psjob.GraphTemplate): the graph a worker
takes from the template is the graph it would have built, and processes forked after a build
draw their own TensorFlow random numbers (tfjob.tf_rng). Whole jobs through the fork server
take shared graphs by default: tests/test_jobs.py (each PS NIC carries exactly its own ToR's
workers: a worker computing on another worker's device would double a NIC's bytes) and
test_forkserver.py check them in Mininet."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.tf

CLUSTER = json.dumps({"ps": ["10.0.0.1:2222", "10.0.0.2:2222"], "worker": [f"10.0.1.{i}:2222" for i in range(3)]})


@pytest.fixture(autouse=True)
def fresh_default_graph():
    """A template's graph is finalized and becomes the default graph: the tests after these build
    their own."""
    yield
    import keras

    keras.utils.clear_session(free_memory=False)


def worker_args(task: int, model: str = "tiny") -> list[str]:
    return ["--cluster", CLUSTER, "--job", "worker", "--task", str(task), "--model", model, "--batch-size", "2"]


def signature(graph) -> tuple[dict, dict]:
    """Name -> (type, device) of every op, and the synthetic batch."""
    import tensorflow as tf

    from tfjob import psjob

    ops = {op.name: (op.type, op.device) for op in graph.get_operations()}
    batch = {n: tf.make_ndarray(graph.get_operation_by_name(n).get_attr("value")).tolist()
             for n in (psjob.SYNTHETIC_X, psjob.SYNTHETIC_Y)}  # fmt: skip
    return ops, batch


def test_an_adopted_template_is_the_graph_the_task_would_build():
    import keras
    import tensorflow as tf

    from tfjob import psjob
    from tfjob.psjob_config import parse_args

    template = psjob.build_template(worker_args(0))
    assert template is not None and template.key == psjob.template_key(worker_args(2))
    assert psjob.template_key(worker_args(0)) != psjob.template_key(worker_args(0, "resnet50"))
    built_as_0 = signature(template.graph)
    pieces = psjob.adopt_template(template, parse_args(worker_args(2)))
    adopted = signature(template.graph)
    assert pieces.sync_hook is not None and pieces.scaffold is not None
    devices = {d for _, d in adopted[0].values()}
    assert not any(d.startswith("/job:worker/task:0") for d in devices), devices
    assert any(d.startswith("/job:worker/task:2") for d in devices), devices
    assert adopted[1] != built_as_0[1]  # worker 2's batch (seed + 2), not worker 0's

    keras.utils.clear_session(free_memory=False)  # layer names as in a fresh process (as build_template)
    psjob.build_train_graph(parse_args(worker_args(2)))
    _, scaffold = psjob._saver_and_scaffold()
    scaffold.finalize()
    fresh = signature(tf.compat.v1.get_default_graph())
    assert adopted == fresh  # the same ops, names and devices, and the same batch
    assert psjob.build_template(["--cluster", CLUSTER, "--job", "ps", "--task", "0"]) is None


def draws_of_two_forked_children(reseed: bool) -> list[int]:
    from tfjob import tf_rng

    out = []
    for _ in range(2):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                if reseed:
                    tf_rng.reseed()
                os.write(w, str(tf_rng.new64()).encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        out.append(int(os.read(r, 64)))
        os.close(r)
    return out


def test_children_forked_after_a_build_draw_their_own_random_numbers():
    """TensorFlow's session handles and step ids come from tsl::random::New64: children forked
    after the generator started draw the same numbers unless reseeded."""
    import tensorflow as tf

    from tfjob import tf_rng

    tf.compat.v1.disable_eager_execution()  # as psjob runs; undone below: it is process-wide
    try:
        with tf.Graph().as_default():
            tf.constant(1.0)  # any graph starts the generator
        assert tf_rng.slot() is not None  # TF 2.21's New64 has the shape tf_rng trusts
        same = draws_of_two_forked_children(reseed=False)
        assert same[0] == same[1]  # what the fork server's children would have drawn
        own = draws_of_two_forked_children(reseed=True)
        assert own[0] != own[1]
    finally:  # later tests in this process (a calibration: Variable.numpy()) need eager execution
        tf.compat.v1.enable_eager_execution()
