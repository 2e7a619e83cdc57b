"""The failure benchmark's reduced parts without an emulation: its experiment files load, its
events name elements of its topologies, and its table says what each cell means."""

from __future__ import annotations

from benchmarks import failures as bench
from runs.inject import plan_timeline
from topologies.build import build_network
from workloads.experiment import load_experiment


def test_experiment_files_load_and_their_events_exist(tmp_path):
    for topo, events in (("psnet-standby", bench.PSNET_EVENTS), ("fattree-standby", bench.FATTREE_EVENTS)):
        dark = 1.0 if topo.startswith("psnet") else None
        path = bench.experiment(topo, events, 3, dark, tmp_path, topo)
        exp, spec, topo_path = load_experiment(path)
        assert [e.at_step for e in exp.timeline] == [3 * (i + 1) for i in range(len(events))]
        assert exp.job.iterations == 3 * (len(events) + 1) and exp.job.checkpoint_every == 2
        assert exp.timeline[-1].action == "fail_ps"
        assert getattr(spec, "dark_ms", None) == dark
        net = build_network(spec, str(topo_path))
        assert plan_timeline(net, exp.timeline, None, str(path)) == exp.timeline
        assert net.standbys(), "a PS failure needs a standby in the benchmark's topology"


def test_table_cells():
    event = {"took_ms": 101.4, "slow_steps": 3, "extra_s": 2.5, "steps_lost": 0, "after_ratio": 1.5}
    rows = [
        {
            "topology": "psnet-standby",
            "dark_ms": 0.0,
            "run": "r",
            "bct_s": 1.9,
            "fidelity": True,
            "not_applied": [],
            "events": [
                {**event, "action": "link_down", "target": "ps1_1-t1_1", "recovery_s": None},
                {**event, "action": "fail_ps", "target": "ps1_2", "recovery_s": 20.0, "steps_lost": 2},
            ],
        }
    ]
    table = bench.format_tables(rows)
    assert "| link_down ps1_1-t1_1 | 101 / not back (x1.50) / 2.50 / 0 |" in table
    assert "| fail_ps ps1_2 | 101 / 20.00 / 2.50 / 2 |" in table
    assert "median BCT 1.90 s; faithful: yes" in table
