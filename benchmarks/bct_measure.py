"""What one point of the BCT benchmark measured beside its run, and how it is judged.

Beside the run: the CPU of this process and its descendants against the machine's, and the peak
memory of every TF process (a sampler, emulation.sampler). From the run's files: TF start-up per
process and the time queued for the emulator. The judgement: measured BCT against the model's
BCT_min and BCT_max, whether the target applies (communication-bound, faithful, complete), and
the diagnostic bound with the bytes the job really placed on its heaviest PS.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from benchmarks.common import maximum, median
from emulation.sampler import Sampler
from tfjob.forkserver import argv_words

TARGET_LOW, TARGET_HIGH = 0.95, 1.10  # measured / BCT_max
#: "communication-bound": predicted T_push at least this many times T_compute
COMM_BOUND_FACTOR = 10.0
RSS_PERIOD_S = 0.5
PSJOB = "tfjob.psjob"


def _arg(cmdline: list[str], flag: str) -> str | None:
    argv = argv_words(cmdline)
    try:
        return argv[argv.index(flag) + 1]
    except (ValueError, IndexError):
        return None


def _is_psjob(p: psutil.Process) -> bool:
    try:
        return PSJOB in argv_words(p.cmdline())
    except psutil.Error:
        return False


def job_sampler(period_s: float = RSS_PERIOD_S) -> Sampler:
    """A sampler of this run's processes: the CPU of this process and its descendants (TF,
    controller, host shells), and the peak memory of its TF processes.

    TF processes are the `python -m tfjob.psjob` processes descended from this one (Mininet's
    host.popen forks them from this process through mnexec), so TF processes of anything else on
    the machine (a test suite's loopback jobs) are left out.
    """
    me = psutil.Process()
    return Sampler(period_s, watch=lambda: [me, *me.children(recursive=True)], track=_is_psjob)


def job_account(sampler: Sampler) -> tuple[list[dict], dict]:
    """Stop the sampler; the TF processes (peak RSS) and who used the CPU while the job ran.

    CPU: the machine's busy time (user, nice, system; not irq/softirq) against the CPU time of
    this process, its descendants and ovs-vswitchd; the rest is other work on the box, which the
    emulation has to share 2 cores with. The account covers the job: from its first TF process
    (after the lock queue and the bring-up) to the end of the run.
    """
    samples = sampler.stop(final=True)
    first = next((i for i, w in enumerate(samples) if w.tracked), None)
    cpu: dict = {"seconds": None, "busy_cores": None, "ours_cores": None, "other_cores": None}
    if first is not None:
        job = samples[first + 1 :]  # the window the first TF process appeared in is the baseline
        dt = max(1e-9, sum(w.dt_s for w in job))
        busy = sum(w.busy_s for w in job) / dt
        ours = sum(w.procs_cpu_s + (w.ovs_cpu or 0.0) * w.dt_s for w in job) / dt
        cpu = {"seconds": dt, "busy_cores": busy, "ours_cores": ours, "other_cores": max(0.0, busy - ours)}
    procs = [
        {
            "pid": m.pid,
            "job": _arg(m.cmdline, "--job"),
            "task": _arg(m.cmdline, "--task"),
            "peak_rss": m.peak_rss,
            "samples": m.samples,
        }
        for m in sampler.memory.values()
    ]
    return sorted(procs, key=lambda r: (r["job"] or "", int(r["task"] or 0))), cpu


def read_events(out_dir: Path) -> list[dict]:
    try:
        lines = (out_dir / "events.jsonl").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def startup(events: list[dict]) -> dict:
    """TF start-up (s) of every process from its ready line: all, PSs, workers."""
    ready = [e for e in events if e.get("event") == "ready" and "startup_s" in e]
    by = {
        "all": [e["startup_s"] for e in ready],
        "ps": [e["startup_s"] for e in ready if e.get("job") == "ps"],
        "worker": [e["startup_s"] for e in ready if e.get("job") == "worker"],
    }
    return {
        "processes": len(ready),
        **{f"{k}_median_s": median(v) for k, v in by.items()},
        **{f"{k}_max_s": maximum(v) for k, v in by.items()},
    }


def pre_emulation_s(events: list[dict], t_call: float) -> float | None:
    """Seconds from the run_experiment call until its network started coming up (lock queue).

    The controller's "start" event carries the time the testbed was up and its bring-up time;
    the difference is when the emulator lock was taken.
    """
    start = next((e for e in events if e.get("host") == "controller" and e.get("event") == "start"), None)
    if not start or "bring_up_s" not in start:
        return None
    return max(0.0, start["t"] - start["bring_up_s"] - t_call)


def judge(summary: dict) -> dict:
    """Ratios to the model, communication-boundness, and whether the target applies / is met."""
    pred = summary.get("predicted") or {}
    bct = (summary.get("bct_s") or {}).get("mean")
    fid = summary.get("fidelity") or {}
    out: dict = {"ratio_min": None, "ratio_max": None, "comm_ratio": None, "comm_bound": None}
    if pred.get("bct_max_s") and bct is not None:
        out["ratio_min"] = bct / pred["bct_min_s"]
        out["ratio_max"] = bct / pred["bct_max_s"]
    if pred.get("t_push_s") and pred.get("t_compute_s"):
        out["comm_ratio"] = pred["t_push_s"] / pred["t_compute_s"]
        out["comm_bound"] = out["comm_ratio"] >= COMM_BOUND_FACTOR
    faithful = bool(fid.get("faithful"))
    applies = bool(out["comm_bound"]) and faithful and summary.get("complete", False)
    if not summary.get("complete", False):
        why = "incomplete run"
    elif not out["comm_bound"]:
        why = "not communication-bound"
    elif not faithful:
        why = "not faithful"
    else:
        why = ""
    out["target_applies"] = applies
    out["target_not_applied_because"] = why
    out["within_target"] = (TARGET_LOW <= out["ratio_max"] <= TARGET_HIGH) if applies and out["ratio_max"] else None
    return out


def placed_bytes_bound(row: dict) -> dict:
    """Diagnostic: Eq. 1 with the bytes the job really placed on its heaviest PS.

    The model gives every PS S/P bytes. In both prototypes the PS side binds (Eq. 5: R B_s / W =
    B_w / P; Eq. 7: B_s / W), so a PS holding a share f of S stretches T_pull and T_push by
    f x P. Not the paper's model: printed beside it to separate placement from emulation. The
    runner's own `predicted_placement` (the model with S = P x the heaviest PS's bytes) is used
    where the summary has it; the two agree to within T_ps_update.
    """
    placed = row.get("predicted_placement") or {}
    pred = row.get("predicted") or {}
    share, mean = row.get("largest_ps_share"), (row.get("bct_s") or {}).get("mean")
    if placed.get("bct_max_s"):
        bound = placed["bct_max_s"]
    elif pred.get("bct_max_s") and share and pred.get("ps"):
        stretch = max(1.0, share * pred["ps"])
        bound = (pred["t_pull_s"] + pred["t_push_s"]) * stretch + pred["t_compute_s"] + pred["t_ps_update_s"]
        bound += pred.get("t_sync_s") or 0.0
    else:
        return {"bct_max_placed_s": None, "ratio_max_placed": None}
    return {"bct_max_placed_s": bound, "ratio_max_placed": mean / bound if mean is not None else None}
