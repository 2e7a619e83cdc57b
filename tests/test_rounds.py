"""A point's repetitions as rounds of one job (runs.rounds): which steps each round owns,
when a round is finished, and which experiments may run as rounds. The end-to-end run (two
rounds per point, one process set) is tests/test_sweep.py::test_quick_replay_end_to_end_then_resume."""

from __future__ import annotations

import pytest

from replays import figure, sweep
from runs import rounds
from workloads.experiment import ExperimentSpec


def rows(workers: int, steps: int, dt: float = 2.0) -> list[dict]:
    """Every worker's row of every step, step s from 100 + (s-1) dt to 100 + s dt (worker w a bit later)."""
    return [
        {"attempt": 0, "task": w, "step": s, "t_start": 100 + (s - 1) * dt, "t_end": 100 + s * dt + 0.1 * w}
        for s in range(1, steps + 1)
        for w in range(workers)
    ]


def test_rounds_own_consecutive_steps_after_the_one_warm_up():
    r1, r2, r3 = rounds.plan(warmup=1, iterations=5, rounds=3)
    assert [(r.after, r.upto) for r in (r1, r2, r3)] == [(1, 6), (6, 11), (11, 16)]
    assert not r1.has(1) and r1.has(2) and r1.has(6) and not r1.has(7) and r3.has(16)
    ran = rows(workers=3, steps=16)
    assert rounds.span(ran, r2) == (100 + 6 * 2.0, 100 + 11 * 2.0 + 0.2)  # the last worker's end
    assert all(rounds.finished(ran, r, workers=3) for r in (r1, r2, r3))
    cut = [r for r in ran if not (r["step"] == 16 and r["task"] == 2)]  # one worker short of the last step
    assert rounds.finished(cut, r2, 3) and not rounds.finished(cut, r3, 3)
    assert rounds.span([], r1) == (None, None)


def test_only_one_tf_ps_job_without_a_timeline_runs_as_rounds():
    fig = figure.load_figure("fig13")
    exp = sweep.point_experiment(fig, fig.points[0], quick=False)
    assert rounds.eligible(exp) == ""
    wide = rounds.widen(exp, 3)
    assert (wide.main.iterations, wide.main.deadline_s) == (3 * exp.main.iterations, 3 * exp.main.deadline_s)
    assert wide.main.model == exp.main.model and wide.compress == exp.compress
    timed = ExperimentSpec.model_validate(
        {**exp.model_dump(), "timeline": [{"at_step": 2, "action": "link_down", "link": ["w1", "t1_1"]}]}
    )
    assert rounds.eligible(timed) == "a timeline"
    with pytest.raises(ValueError, match="cannot run its repetitions as rounds of one job \\(a timeline\\)"):
        rounds.widen(timed, 3)
    ring = ExperimentSpec.model_validate(
        {**exp.model_dump(), "job": {**exp.main.model_dump(), "scheme": "ring", "host_time": "scaled"}}
    )
    assert rounds.eligible(ring) == "scheme ring"
    assert figure.load_figure("fig10").repeat_as == "rounds"
