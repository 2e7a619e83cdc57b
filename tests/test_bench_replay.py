"""The replay stability benchmark (benchmarks/replay.py) compares two Fig. 13 sweeps' headlines.
Both sweeps here are finished folders (seeded runs, so nothing is emulated): the benchmark must
read each report's claim (its ratio as run here: the seeded runs record no step split, so no
paper-equivalent one) and give their difference. The full benchmark (two real replays) is
`scripts/bench_replay.sh`."""

from __future__ import annotations

import pytest

from benchmarks import replay
from replays import figure
from tests.test_sweep import FIG13, seed_results


def seeded(tmp_path, name: str, fattree_factor: float):
    folder = tmp_path / name
    fig = figure.load_figure("fig13")
    bcts = {k: ((v[0] * fattree_factor, v[1]) if k.startswith("fattree") else v) for k, v in FIG13.items()}
    seed_results(folder / "fig13", fig, bcts, reps=3)
    return folder


def test_two_replays_headlines_and_their_difference(tmp_path, capsys):
    a = replay.replay_once(seeded(tmp_path, "run1", 1.0), quick=False, keep=True, progress=False)
    b = replay.replay_once(seeded(tmp_path, "run2", 1.03), quick=False, keep=True, progress=False)
    assert set(a["headlines"]) == {"VGG-16", "ResNet50"}
    vgg1, vgg2 = a["headlines"]["VGG-16"], b["headlines"]["VGG-16"]
    assert vgg1["paper"] == 1.89
    assert vgg1["measured"] == pytest.approx(6.2 / 2.2, rel=1e-3)  # FatTree r=1 / PSNet, as run
    assert vgg2["measured"] == pytest.approx(6.2 * 1.03 / 2.2, rel=1e-3)
    assert (vgg1["unit"], vgg1["as_run"]) == ("as run", vgg1["measured"])
    rows = {r["group"]: r for r in replay.compare([a, b])}
    assert rows["VGG-16"]["difference"] == pytest.approx(0.03 / 1.015, rel=1e-3)
    assert a["faithful"] == a["points"] == 8
    table = replay.format_table({"runs": [a, b], "groups": list(rows.values()), "quick": False})
    assert "| VGG-16 | 1.89 | 2.82x | 2.90x | 3.0% | yes |" in table


def test_missing_headline_gives_no_difference():
    assert replay.difference(None, 2.0) is None
    assert replay.difference(2.0, 2.2) == pytest.approx(0.2 / 2.1)
