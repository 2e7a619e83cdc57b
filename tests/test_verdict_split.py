"""The reproduction page's split of the fidelity verdict (replays.verdict_split): the numbers it
reads back from verdict texts that `emulation.fidelity.judge` itself wrote, and the split they give."""

from __future__ import annotations

import pytest

from emulation.fidelity import LINK_FULL, FidelityInputs, judge
from emulation.phases import Window, phases
from replays.verdict_split import signals, split

RATES = {"t1_1-eth1": 100.0}


def _text(ovs: float, idle: float, *utils: float) -> tuple[bool, str]:
    """A verdict (faithful, text) from judge: 0.25-s windows at these utilisations, one phase."""
    ws = phases([Window(100.0 + 0.25 * (i + 1), 0.25, u, "t1_1-eth1") for i, u in enumerate(utils)])
    v = judge(FidelityInputs([ovs] * 10, [idle] * 10, {"t1_1-eth1": 100.0}, RATES, phases=ws))
    return v.faithful, v.reason


def test_the_numbers_come_back_from_both_forms_of_the_verdicts_text():
    faithful, text = _text(0.97, 0.01, 0.3, 0.85, 0.85, 0.85, 0.2)  # starved, 85%: passes
    s = signals(text)
    assert faithful and s is not None and s.starved
    assert (s.ovs_p95, s.idle_p5, s.transfer_util) == (0.97, 0.01, 0.85)
    faithful, text = _text(0.97, 0.01, 0.3, 0.6, 0.6, 0.6, 0.2)  # starved, 60%: the reason's form
    s = signals(text)
    assert not faithful and s is not None and s.starved and s.transfer_util == 0.6
    faithful, text = _text(0.4, 0.5, 0.3, 0.7, 0.7, 0.7, 0.2)  # CPU to spare: faithful at 70%
    s = signals(text)
    assert faithful and s is not None and not s.starved and s.idle_p5 == 0.5
    assert signals("colocate_ps: worker and PS talk over one host's loopback") is None


def test_the_split_lists_the_starved_points_passed_under_link_full():
    points = [
        ("figA", "a", *_text(0.97, 0.01, 0.3, 0.85, 0.85, 0.85, 0.2)),  # starved, passed at 85%: doubtful
        ("figA", "b", *_text(0.97, 0.01, 0.3, 0.98, 0.98, 0.98, 0.2)),  # starved at 98%
        ("figB", "c", *_text(0.4, 0.5, 0.3, 0.7, 0.7, 0.7, 0.2)),  # not starved, 70%
        ("figB", "d", *_text(0.4, 0.5, 0.3, 0.95, 0.95, 0.95, 0.2)),  # not starved, 95%
        ("figB", "e", *_text(0.97, 0.01, 0.3, 0.6, 0.6, 0.6, 0.2)),  # not faithful: not in the groups
        ("figC", "f", True, "colocate_ps: worker and PS talk over one host's loopback"),
    ]
    s = split(points)
    assert sorted(s.starved.utils) == [0.85, 0.98] and sorted(s.unstarved.utils) == [0.7, 0.95]
    assert [(p.result, p.id) for p in s.doubtful] == [("figA", "a")]
    assert s.without_numbers == 1 and s.unstarved.under_full == 1
    assert f"1 starved point(s) passed under {LINK_FULL:.0%} (lowest 85%)" in s.conclusion()
    assert "1 of 2 unstarved points (50%)" in s.conclusion()


@pytest.mark.parametrize("util", [0.91, 0.99])
def test_nothing_doubtful_when_every_starved_point_reached_link_full(util):
    s = split([("figA", "a", *_text(0.97, 0.01, 0.3, util, util, util, 0.2))])
    assert not s.doubtful and "decided nothing" in s.conclusion()
