"""PLink's Autotune (runs/autotune.py, engine/host.py's Plans): hosts take a new plan between
iterations, all on the same iteration, and every iteration's sum stays exact over real TCP on
loopback; the daemon's decisions on measured rows: a GST that jumps by more than 20% triggers
Quicktune, which takes master duties off the host whose measured bandwidth fell, and Finetune
then moves duties by blame until a move stops paying. (On the emulated network, with a
`set_rate` in the timeline: tests/test_plink_runs.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from engine.host import verify_sums
from engine.processes import local_starter, plan_of_iteration, publish_plan, read_rows, run_scheme
from runs.autotune import Autotune
from schemes import registry
from schemes.plink import finetune, initial_plan, two_level
from schemes.schedule import host_bytes, segmented
from tests.test_scheme_engine import N_ELEMS, config

WORKERS = [f"w{i}" for i in range(6)]
GROUPS = {w: f"g{i // 3}" for i, w in enumerate(WORKERS)}
SEGMENT = 8192


def _plan_schedule(plan):
    return segmented(two_level(WORKERS, N_ELEMS, GROUPS, assignment=plan), SEGMENT)


def test_hosts_switch_plans_between_iterations_and_the_sums_stay_exact(tmp_path: Path):
    """Six processes on loopback, 6 iterations; once iteration 1 is done a new plan (two master
    duties moved off w0) is published: every host runs it from the same iteration on, each
    iteration's sum is exact, and each host sends what its plan counts."""
    start = initial_plan(WORKERS, GROUPS, N_ELEMS)
    moved = finetune(start, GROUPS, {w: (9.0 if w == "w0" else 1.0 + i) for i, w in enumerate(WORKERS)}, 2)
    assert moved != start
    cfg = config(
        "plink", WORKERS, clusters=GROUPS, streams=2, segment_bytes=SEGMENT, replan=True, iterations=6, compute_s=0.3
    )  # 0.3 s of compute: the tick sees iteration 1 end long before the last begins
    published: list[int] = []

    def tick() -> None:
        done = [r for r in read_rows(tmp_path / "w0.jsonl") if "iteration" in r]
        if not published and any(r["iteration"] >= 1 for r in done):
            publish_plan(tmp_path, 1, _plan_schedule(moved))
            published.append(1)

    run = run_scheme(
        cfg, WORKERS, dict.fromkeys(WORKERS, "127.0.0.1"), tmp_path, local_starter(tmp_path), 120, on_tick=tick
    )
    assert verify_sums(tmp_path, WORKERS) == []
    plans = [plan_of_iteration(tmp_path, it) for it in range(7)]
    assert plans[:2] == [0, 0] and plans[-1] == 1 and sorted(plans) == plans  # switched once, for good
    counted = {0: host_bytes(_plan_schedule(start)), 1: host_bytes(_plan_schedule(moved))}
    assert counted[0]["w0"][0] > counted[1]["w0"][0]  # w0 sends less under the new plan
    for r in run.rows:
        assert r["plan"] == plans[r["iteration"]]
        assert r["sent_bytes"] == counted[r["plan"]][r["host"]][0]
        assert set(r["peers"]) == set(WORKERS) - {r["host"]}  # connected to every host, measured by TCP
    assert registry.compile_from_config(cfg).chunks == _plan_schedule(moved).chunks


def _rows(tmp_path: Path, it: int, plan: int, gst: float, slow: str | None = None) -> None:
    """One iteration's rows as hosts write them: w0..w5 at 10 MB/s to every peer, `slow` at 2."""
    for h in WORKERS:
        peers = {p: [1e5, (2e6 if slow in (h, p) else 1e7), 1e-3] for p in WORKERS if p != h}
        row = {
            "iteration": it,
            "warmup": False,
            "host": h,
            "role": "worker",
            "sync_s": gst,
            "plan": plan,
            "peers": peers,
        }
        with (tmp_path / f"{h}.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")


def test_autotune_triggers_quicktune_then_finetunes_off_the_slow_host(tmp_path: Path):
    """Two iterations 50% slower (w0's rates fell to a fifth) trigger Quicktune, whose plan takes
    duties off w0; after that plan has run two iterations Finetune moves one more duty by blame,
    and when that move does not pay, the daemon goes back to the better plan and stays."""
    start = initial_plan(WORKERS, GROUPS, N_ELEMS)
    tuner = Autotune(tmp_path, WORKERS, GROUPS, N_ELEMS, SEGMENT, start)
    for it in range(3):  # steady: no decision
        _rows(tmp_path, it, 0, 1.0)
    _rows(tmp_path, 3, 0, 1.5, slow="w0")  # one slow iteration is not yet a change
    tuner.tick()
    assert tuner.decisions == [] and tuner.version == 0
    _rows(tmp_path, 4, 0, 1.5, slow="w0")
    tuner.tick()
    assert [d.action for d in tuner.decisions] == ["quicktune"] and (tmp_path / "plans" / "v1").is_dir()
    gm0, lm0 = tuner.duties(start)
    gm1, lm1 = tuner.duties(tuner.plans[1])
    assert gm1["w0"] <= gm0["w0"] and lm1["w0"] < lm0["w0"]  # duties off the slow host
    assert lm1["w0"] < min(lm1[w] for w in ("w1", "w2"))
    _rows(tmp_path, 5, 0, 1.5, slow="w0")  # ran before the hosts took plan 1: not judged
    _rows(tmp_path, 6, 1, 1.2, slow="w0")
    _rows(tmp_path, 7, 1, 1.3, slow="w0")
    tuner.tick()
    assert [d.action for d in tuner.decisions] == ["quicktune", "finetune"] and tuner.version == 2
    assert "off w0" in tuner.decisions[-1].detail
    _rows(tmp_path, 8, 2, 1.21, slow="w0")  # the move did not pay: back to plan 1, steady
    _rows(tmp_path, 9, 2, 1.25, slow="w0")
    tuner.tick()
    assert tuner.decisions[-1].action == "revert" and tuner.plans[3] == tuner.plans[1] and not tuner.tuning
    assert [p["plan"] for p in tuner.record()["iterations"]] == [0, 0, 0, 0, 0, 0, 1, 1, 2, 2]
