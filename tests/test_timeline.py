"""Timelines without a network: the event schema, the random-failure rounds, steps and recovery metrics.

The metrics are checked on synthetic BCT series whose answers are known by construction, so a
wrong window, baseline or slow-run rule changes a number the tests compare.
"""

from __future__ import annotations

import csv
from collections import Counter

import pytest
from pydantic import ValidationError

from runs.recovery import Applied, Step, recovery, steps_from_rows
from runs.timeline_out import plot, write_csv
from workloads.timeline import RandomFailures, TimelineEvent, expand

LINKS = [(f"t1_{i}", f"s{i}") for i in range(1, 11)]
SWITCHES = ["t1_1", "t1_2", "t1_3"]
CANDIDATES = {"links": LINKS, "switches": SWITCHES}


# --- schema -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "target"),
    [
        ({"action": "link_down", "link": ["ps1_1", "t1_1"]}, "ps1_1-t1_1"),
        ({"action": "link_up", "link": ["ps1_1", "t1_1"], "dark_ms": 5}, "ps1_1-t1_1"),
        ({"action": "fail_switch", "node": "t1_2"}, "t1_2"),
        ({"action": "repair_switch", "node": "t1_2", "dark_ms": 0}, "t1_2"),
        ({"action": "fail_ps", "node": "ps1_1"}, "ps1_1"),
        ({"action": "set_rate", "link": ["ps1_1", "t1_1"], "mbps": 50}, "ps1_1-t1_1 @ 50 Mbit/s"),
        ({"action": "reconfigure", "worker": "w1_1_1", "tor": "t1_3", "dark_ms": 2.5}, "w1_1_1->t1_3"),
        ({"action": "pause_senders", "k": 2, "every_s": 1}, "k=2 every 1 s"),
        ({"action": "pause_senders", "k": 1, "every_s": 0.5, "for_s": 20, "seed": 4}, "k=1 every 0.5 s for 20 s"),
    ],
)
def test_each_action_accepts_its_form(fields, target):
    ev = TimelineEvent.model_validate({"at_s": 3, **fields})
    assert ev.action == fields["action"]
    assert ev.target() == target


def test_at_step_is_an_alternative_to_at_s():
    ev = TimelineEvent.model_validate({"at_step": 30, "action": "fail_ps", "node": "ps1_1"})
    assert (ev.at_s, ev.at_step) == (None, 30)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"action": "link_down"}, "link"),
        ({"action": "set_rate", "link": ["a", "b"]}, "mbps"),
        ({"action": "fail_switch"}, "node"),
        ({"action": "reconfigure", "worker": "w1_1_1"}, "tor"),
        ({"action": "reconfigure", "tor": "t1_3"}, "worker"),
        ({"action": "pause_senders", "k": 2}, "every_s"),
        ({"action": "pause_senders", "every_s": 1}, "k"),
    ],
)
def test_missing_field_is_named(fields, field):
    with pytest.raises(ValidationError) as err:
        TimelineEvent.model_validate({"at_s": 1, **fields})
    assert f"{field}: {fields['action']} needs {field}" in str(err.value)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"action": "link_down", "link": ["a", "b"], "node": "t1_1"}, "node"),
        ({"action": "link_down", "link": ["a", "b"], "mbps": 10}, "mbps"),
        ({"action": "fail_ps", "node": "ps1_1", "link": ["a", "b"]}, "link"),
        ({"action": "fail_ps", "node": "ps1_1", "dark_ms": 5}, "dark_ms"),
        ({"action": "set_rate", "link": ["a", "b"], "mbps": 5, "dark_ms": 1}, "dark_ms"),
        ({"action": "reconfigure", "worker": "w", "tor": "t", "node": "t"}, "node"),
    ],
)
def test_extra_field_is_named(fields, field):
    with pytest.raises(ValidationError) as err:
        TimelineEvent.model_validate({"at_s": 1, **fields})
    assert f"{field}: {fields['action']}" in str(err.value)
    assert "remove" in str(err.value)


def test_unknown_key_and_bad_values_are_refused():
    with pytest.raises(ValidationError, match="lnk"):
        TimelineEvent.model_validate({"at_s": 1, "action": "link_down", "link": ["a", "b"], "lnk": 1})
    with pytest.raises(ValidationError, match="action"):
        TimelineEvent.model_validate({"at_s": 1, "action": "unplug", "node": "t1_1"})
    with pytest.raises(ValidationError, match="mbps"):
        TimelineEvent.model_validate({"at_s": 1, "action": "set_rate", "link": ["a", "b"], "mbps": 0})
    with pytest.raises(ValidationError, match="both ends"):
        TimelineEvent.model_validate({"at_s": 1, "action": "link_down", "link": ["a", "a"]})


def test_exactly_one_of_at_s_and_at_step():
    with pytest.raises(ValidationError, match="not both"):
        TimelineEvent.model_validate({"at_s": 1, "at_step": 2, "action": "fail_ps", "node": "ps1_1"})
    with pytest.raises(ValidationError, match="at_s: an event needs a time"):
        TimelineEvent.model_validate({"action": "fail_ps", "node": "ps1_1"})


# --- expand -----------------------------------------------------------------------------------------
def _ev(**fields) -> TimelineEvent:
    return TimelineEvent.model_validate(fields)


def test_explicit_events_sorted_and_step_events_last():
    a = _ev(at_s=20, action="link_up", link=["a", "b"])
    b = _ev(at_step=7, action="fail_ps", node="ps1_1")
    c = _ev(at_s=5, action="link_down", link=["a", "b"])
    d = _ev(at_step=3, action="fail_switch", node="t1_1")
    assert expand([a, b, c, d], None, CANDIDATES) == [c, a, b, d]


def _failed(events: list[TimelineEvent]) -> list[tuple[str, str]]:
    return [e.link for e in events if e.action == "link_down"]  # type: ignore[misc]


def test_random_rounds_are_reproducible_and_seeded():
    rf = RandomFailures(k=2, every_s=10, start_s=5, count=4, seed=3)
    first = expand([], rf, CANDIDATES)
    assert first == expand([], rf, CANDIDATES)
    assert first == expand([], rf, {"links": list(reversed(LINKS))})  # the draws depend on the set, not its order
    others = [_failed(expand([], rf.model_copy(update={"seed": s}), CANDIDATES)) for s in range(4, 9)]
    assert all(o != _failed(first) for o in others)
    assert [e.at_s for e in first if e.action == "link_down"] == [5, 5, 15, 15, 25, 25, 35, 35]


def test_every_random_failure_is_repaired_before_new_ones():
    rf = RandomFailures(k=3, every_s=10, count=3, seed=1)
    events = expand([], rf, CANDIDATES)
    down = Counter(e.link for e in events if e.action == "link_down")
    up = Counter(e.link for e in events if e.action == "link_up")
    assert down == up
    assert sum(down.values()) == 9
    last = [e for e in events if e.at_s == 30]
    assert len(last) == 3 and {e.action for e in last} == {"link_up"}
    for t in (10, 20):  # each round: the previous k repaired first, then k new failures
        at_t = [e.action for e in events if e.at_s == t]
        assert at_t == ["link_up"] * 3 + ["link_down"] * 3
    for rnd in range(3):  # no link drawn twice in one round
        assert len({e.link for e in events if e.at_s == rnd * 10 and e.action == "link_down"}) == 3


def test_random_switches_and_explicit_first_at_equal_times():
    explicit = _ev(at_s=10, action="fail_ps", node="ps1_1")
    rf = RandomFailures(k=1, every_s=10, count=2, what="switches", seed=2)
    events = expand([explicit], rf, CANDIDATES)
    assert [e.at_s for e in events] == [0, 10, 10, 10, 20]
    assert events[1] == explicit
    assert [e.action for e in events[2:]] == ["repair_switch", "fail_switch", "repair_switch"]
    assert events[0].node in SWITCHES and events[2].node == events[0].node


def test_k_above_candidates_is_refused():
    with pytest.raises(ValueError, match=r"random_failures\.k: k=4 but only 3 switches"):
        expand([], RandomFailures(k=4, every_s=5, what="switches"), CANDIDATES)
    with pytest.raises(ValueError, match=r"k=1 but only 0 links"):
        expand([], RandomFailures(k=1, every_s=5), {"switches": SWITCHES})


# --- steps ------------------------------------------------------------------------------------------
def test_steps_take_the_slowest_worker():
    rows = [
        {"task": 0, "step": 1, "global_step": 1, "t_start": 10.0, "t_end": 11.0, "bct_s": 1.0},
        {"task": 1, "step": 1, "global_step": 1, "t_start": 10.2, "t_end": 11.5, "bct_s": 1.3},
        {"task": 0, "step": 2, "global_step": 2, "t_start": 11.5, "t_end": 13.0, "bct_s": 1.5},
        {"task": 1, "step": 2, "global_step": 2, "t_start": 11.6, "t_end": 12.6, "bct_s": 1.1},
    ]
    steps = steps_from_rows(reversed(rows), "j")
    assert steps == [Step("j", 1, 10.0, 11.5, 1.3), Step("j", 2, 11.5, 13.0, 1.5)]


def test_restarted_attempt_keeps_its_steps_and_step_is_the_fallback_key():
    rows = [
        {"task": 0, "step": 1, "t_start": 0.0, "t_end": 1.0, "bct_s": 1.0},
        {"task": 0, "step": 2, "t_start": 1.0, "t_end": 2.0, "bct_s": 1.0},
        {"task": 0, "step": 1, "t_start": 5.0, "t_end": 6.5, "bct_s": 1.5, "attempt": 1},
        {"task": 1, "step": 1, "t_start": 5.1, "t_end": 6.0, "bct_s": 0.9, "attempt": 1},
    ]
    steps = steps_from_rows(rows, "j")
    assert [(s.attempt, s.step, s.t_end, s.bct_s) for s in steps] == [
        (0, 1, 1.0, 1.0),
        (0, 2, 2.0, 1.0),
        (1, 1, 6.5, 1.5),
    ]


# --- recovery ---------------------------------------------------------------------------------------
def _series(bcts: list[float], start: float = 0.0) -> list[Step]:
    """Back-to-back steps with the given BCTs."""
    out, t = [], start
    for i, b in enumerate(bcts, start=1):
        out.append(Step("j", i, t, t + b, b))
        t += b
    return out


def test_recovery_of_a_transient_slowdown():
    steps = _series([1.0] * 5 + [2.0, 1.6, 1.05, 1.0])  # baseline steps end at 1..5
    [m] = recovery(steps, [Applied(t=5.5, action="link_down", target="a-b", took_ms=3.0)])
    assert m["baseline_s"] == 1.0
    assert m["resume_s"] == pytest.approx(7.0 - 5.5)
    assert m["recovery_s"] == pytest.approx(8.6 - 5.5)  # the 1.6 step ends at 5 + 2.0 + 1.6
    assert m["slow_steps"] == 2
    assert m["extra_s"] == pytest.approx(1.0 + 0.6)
    assert m["after_ratio"] == pytest.approx(1.025)
    assert (m["action"], m["target"], m["took_ms"], m["steps_lost"]) == ("link_down", "a-b", 3.0, 0)


def test_persistent_slowdown_has_no_recovery_but_a_level():
    steps = _series([1.0] * 5 + [1.5] * 6)
    [m] = recovery(steps, [Applied(t=5.0, action="link_down", target="a-b")])
    assert m["recovery_s"] is None
    assert m["slow_steps"] == 6
    assert m["extra_s"] == pytest.approx(3.0)
    assert m["after_ratio"] == pytest.approx(1.5)  # documented: the slow run's level when never recovered


def test_a_restart_outage_counts_as_one_long_step():
    """A job restarted on a standby PS: no step for 10 s, then normal BCTs; the outage is the
    first restarted step's duration (time since the last step before the failure ended)."""
    before = _series([1.0] * 5)  # ends at 1..5
    after = [Step("j", k, t, t + 1.0, 1.0, attempt=1) for k, t in ((5, 15.0), (6, 16.0), (7, 17.0))]
    [m] = recovery(before + after, [Applied(t=5.2, action="fail_ps", target="ps1_2")])
    assert m["resume_s"] == pytest.approx(16.0 - 5.2)
    assert m["recovery_s"] == pytest.approx(16.0 - 5.2) and m["slow_steps"] == 1
    assert m["extra_s"] == pytest.approx(11.0 - 1.0)  # 16 - 5 = 11 s for one step of 1 s
    assert m["after_ratio"] == pytest.approx(1.0)


def test_event_without_effect_recovers_at_once():
    steps = _series([1.0] * 5 + [1.05, 0.98, 1.0])
    [m] = recovery(steps, [Applied(t=5.0, action="set_rate", target="a-b @ 900 Mbit/s")])
    assert (m["recovery_s"], m["slow_steps"], m["extra_s"]) == (0.0, 0, 0.0)
    assert m["resume_s"] == pytest.approx(1.05)
    assert m["after_ratio"] == pytest.approx(1.0)


def test_unaffected_in_flight_step_is_skipped():
    steps = _series([1.0] * 5 + [1.0, 3.0, 2.0, 1.0, 1.0])  # the event hits the 6th step (4.9..5.9) mid-way
    [m] = recovery(steps, [Applied(t=5.5, action="fail_switch", target="t1_2")])
    assert m["slow_steps"] == 2
    assert m["resume_s"] == pytest.approx(9.0 - 5.5)  # the in-flight step finishing is not a resumption
    assert m["recovery_s"] == pytest.approx(11.0 - 5.5)
    assert m["extra_s"] == pytest.approx(3.0)
    slowed = _series([1.0] * 5 + [2.5, 1.0, 1.0])  # an in-flight step the event slowed is counted
    [m] = recovery(slowed, [Applied(t=5.5, action="fail_switch", target="t1_2")])
    assert (m["slow_steps"], m["resume_s"], m["recovery_s"]) == (1, 2.0, 2.0)


def test_next_event_bounds_the_window():
    steps = _series([1.0] * 5 + [2.0, 1.0, 1.0, 1.0])  # ends: 1..5, 7, 8, 9, 10
    first, second = recovery(
        steps, [Applied(t=5.0, action="link_down", target="a-b"), Applied(t=7.5, action="link_up", target="a-b")]
    )
    assert first["slow_steps"] == 1 and first["recovery_s"] is None  # the 1.0 steps after 7.5 are the second's
    assert first["after_ratio"] == pytest.approx(2.0)
    assert second["baseline_s"] == 1.0  # the last five before 7.5: four 1.0 and the 2.0
    assert second["recovery_s"] == 0.0
    assert second["resume_s"] == pytest.approx(1.5)  # 7..8 was in flight and unaffected: 8..9 resumes
    alone = recovery(steps, [Applied(t=5.0, action="link_down", target="a-b")])[0]
    assert alone["recovery_s"] == pytest.approx(2.0)  # without the second event it would have recovered


def test_events_at_the_same_time_share_a_window():
    steps = _series([1.0] * 5 + [3.0, 1.0])
    events = [Applied(t=5.0, action="link_up", target="a-b"), Applied(t=5.0, action="link_down", target="c-d")]
    a, b = recovery(steps, events)
    assert a["recovery_s"] == b["recovery_s"] == pytest.approx(3.0)
    assert a["extra_s"] == b["extra_s"] == pytest.approx(2.0)


def test_no_baseline_and_no_steps_after():
    steps = _series([1.0, 1.0])
    early, late = recovery(steps, [Applied(t=0.0, action="a", target="x"), Applied(t=9.0, action="b", target="y")])
    assert early["baseline_s"] is None and early["recovery_s"] is None and early["resume_s"] == 1.0
    assert late["baseline_s"] == 1.0 and late["resume_s"] is None and late["recovery_s"] is None
    assert late["slow_steps"] == 0 and late["after_ratio"] is None


# --- outputs ----------------------------------------------------------------------------------------
def test_write_csv_and_plot(tmp_path):
    t0 = 1_700_000_000.0
    steps = {"vgg": _series([1.0] * 5 + [2.0, 1.0], start=t0), "tiny": _series([0.5] * 6, start=t0)}
    steps["vgg"] += [Step("vgg", 1, t0 + 9, t0 + 10, 1.0, attempt=1)]
    events = [Applied(t=t0 + 5.0, action="link_down", target="a-b", detail="ecs")]
    metrics = recovery(steps["vgg"], events)
    timeline, events_csv = write_csv(tmp_path, steps, metrics, t0)
    rows = list(csv.DictReader(timeline.open()))
    assert list(rows[0]) == ["job", "attempt", "step", "t_start_s", "t_end_s", "bct_s"]
    assert len(rows) == 8 + 6
    assert rows[5] == {
        "job": "vgg",
        "attempt": "0",
        "step": "6",
        "t_start_s": "5.000",
        "t_end_s": "7.000",
        "bct_s": "2.0000",
    }
    ev = list(csv.DictReader(events_csv.open()))
    assert len(ev) == 1 and next(iter(ev[0])) == "t_s" and "t" not in ev[0]
    assert (ev[0]["t_s"], ev[0]["recovery_s"], ev[0]["slow_steps"], ev[0]["detail"]) == ("5.0000", "2.0000", "1", "ecs")
    png = plot(tmp_path, steps, metrics, t0, "vgg with a link down")
    assert png == tmp_path / "timeline.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_outputs_without_events(tmp_path):
    _, events_csv = write_csv(tmp_path / "out", {}, [], 0.0)
    assert events_csv.read_text().splitlines() == [
        "t_s,action,target,took_ms,detail,baseline_s,resume_s,recovery_s,slow_steps,extra_s,after_ratio,steps_lost"
    ]
    assert plot(tmp_path / "out", {}, [], 0.0, "empty").stat().st_size > 0


def test_pause_senders_takes_no_network_target_and_needs_a_time():
    with pytest.raises(ValidationError, match="link: pause_senders does not take link"):
        TimelineEvent.model_validate({"at_s": 1, "action": "pause_senders", "k": 1, "every_s": 1, "link": ["a", "b"]})
    with pytest.raises(ValidationError, match="for_s: link_down does not take for_s"):
        TimelineEvent.model_validate({"at_s": 1, "action": "link_down", "link": ["a", "b"], "for_s": 3})
    with pytest.raises(ValidationError, match="pause_senders draws its pauses from a time; give at_s"):
        TimelineEvent.model_validate({"at_step": 2, "action": "pause_senders", "k": 1, "every_s": 1})


def test_shuffle_names_its_background_hosts_and_a_time():
    """Parameter Flow's shared cluster: background hosts shuffle all-to-all from at_s, scheme jobs only."""
    ok = TimelineEvent.model_validate({"at_s": 0, "action": "shuffle", "hosts": ["a", "b"], "mb": 5, "every_s": 4})
    assert ok.target() == "2 hosts, 5 MB each way every 4 s"
    with pytest.raises(ValidationError, match="mb: shuffle needs mb: MB"):
        TimelineEvent.model_validate({"at_s": 0, "action": "shuffle", "hosts": ["a", "b"], "every_s": 4})
    with pytest.raises(ValidationError, match="hosts: a shuffle needs at least two distinct background hosts"):
        TimelineEvent.model_validate({"at_s": 0, "action": "shuffle", "hosts": ["a", "a"], "mb": 5, "every_s": 4})
    with pytest.raises(ValidationError, match="shuffle starts its shuffles from a time; give at_s"):
        TimelineEvent.model_validate({"at_step": 2, "action": "shuffle", "hosts": ["a", "b"], "mb": 5, "every_s": 4})
