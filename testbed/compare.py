"""`testbed compare RUN_A RUN_B`: two runs of one experiment side by side, typically emulated
(`testbed run EXP`) and real (`testbed run EXP --hosts INV`): how a user validates the emulator.

Read from each run's summary.json only (nothing is recomputed): the BCT's mean, 95% CI and
median, the model's prediction (and, for a real run, when it applies), and per PS the bytes TF
placed on it and the bytes its NIC moved (an emulated PS's interfaces; a real PS's server's
data-plane NIC, which also carries any worker sharing that server).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from runs.summary import RunSummary, Stats, read_summary
from topologies.spec import InputError

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Run:
    label: str
    summary: RunSummary


def load_run(ref: str) -> Run:
    """A results folder, or the name of one under results/; FileNotFoundError (one line) if neither,
    runs.summary.SummaryError (one line naming file and field) if its summary.json is malformed;
    InputError (one line naming the file and the fix) if its run did not finish: a summary not
    marked `complete: true`, or one whose run_id is not the manifest.json's beside it (a later run
    into the folder was killed before its summary: the numbers are not that run's)."""
    for folder in (Path(ref), REPO / "results" / ref):
        f = folder / "summary.json"
        if f.is_file():
            return Run(folder.name, finished_summary(f))
    for folder in (Path(ref), REPO / "results" / ref):
        if (folder / "manifest.json").is_file():  # a run started there and was killed before its summary
            prev = folder.with_name(folder.name + ".prev")
            kept = f"; the run before it is in {prev}" if (prev / "summary.json").is_file() else ""
            raise FileNotFoundError(
                f"{folder / 'summary.json'}: missing beside manifest.json (the run did not finish{kept}); "
                f"run it again: testbed run {_experiment(folder / 'manifest.json')}"
            )
    raise FileNotFoundError(f"{ref}: no summary.json there nor in results/{ref}/; give a run's results folder")


def _experiment(manifest: Path) -> str:
    """The experiment file a run's manifest names ('EXP.yaml' where it cannot be read)."""
    try:
        return str(json.loads(manifest.read_text()).get("experiment") or "EXP.yaml")
    except (OSError, ValueError, AttributeError):
        return "EXP.yaml"


def finished_summary(f: Path) -> RunSummary:
    """The run summary in `f` if its run finished (see load_run), else InputError (or, for a
    file that is no summary, runs.summary.SummaryError naming file and field)."""
    again = "run it again (testbed run EXP.yaml) or compare another run"
    try:
        s = read_summary(f)
    except OSError as err:
        raise InputError(f"{f}: not readable ({err}); {again}") from None
    if s.complete is not True:
        why = s.error or "the run ended early"
        raise InputError(f"{f}: complete is not true ({why}); {again}")
    try:
        run_id = json.loads(f.with_name("manifest.json").read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        run_id = None  # no manifest (a copied summary), or one written before run ids: nothing to match
    if run_id and s.get("run_id") != run_id:
        raise InputError(f"{f}: another run's than manifest.json beside it (a later run did not finish); {again}")
    return s


def mode(s: RunSummary) -> str:
    return "hardware" if s.hardware else "emulated"


def nic_bytes(s: RunSummary) -> dict[str, float]:
    """PS host -> bytes its NIC(s) moved (rx + tx) over the run."""
    if s.hardware:
        placed, servers = s.hardware.placements, s.hardware.servers
        out = {}
        for ps in s.ps_hosts:
            v = servers.get(placed.get(ps, {}).get("server"), {})
            if v:
                out[ps] = v.get("run_rx_bytes", v["rx_bytes"]) + v.get("run_tx_bytes", v["tx_bytes"])
        return out
    return {ps: sum(d["rx"] + d["tx"] for d in ifs.values()) for ps, ifs in (s.ps_nic_bytes or {}).items()}


def _mb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:.3f} MB"


def _model(s: RunSummary) -> str:
    p = s.pred
    if p.get("equation"):
        return f"{p['bct_min_s']:.3f}-{p['bct_max_s']:.3f} s ({p['equation']})"
    return p.get("note", "-")


def rows(a: Run, b: Run) -> list[tuple[str, str, str]]:
    sa, sb = a.summary, b.summary
    ba, bb = sa.bct_s, sb.bct_s
    out = [
        ("mode", mode(sa), mode(sb)),
        ("job", _job(sa), _job(sb)),
        ("BCT mean", _bct(ba), _bct(bb)),
        ("BCT p50", _s(ba.p50), _s(bb.p50)),
        ("model BCT", _model(sa), _model(sb)),
    ]
    pa, pb = sa.bytes_per_ps or {}, sb.bytes_per_ps or {}
    for i, key in enumerate(sorted(set(pa) | set(pb))):
        out.append((f"PS {i} placed", _mb(pa.get(key)), _mb(pb.get(key))))
    na, nb = nic_bytes(sa), nic_bytes(sb)
    for i in range(max(len(sa.ps_hosts), len(sb.ps_hosts))):
        ha, hb = _at(sa.ps_hosts, i), _at(sb.ps_hosts, i)
        out.append((f"PS {i} NIC rx+tx", f"{ha}: {_mb(na.get(ha))}", f"{hb}: {_mb(nb.get(hb))}"))
    if ba.mean and bb.mean:
        out.append(("BCT b / a", "", f"{bb.mean / ba.mean:.2f}x"))
    return out


def compare(a: Run, b: Run) -> str:
    """The side-by-side table."""
    table = [("", a.label, b.label), *rows(a, b)]
    w0 = max(len(r[0]) for r in table)
    w1 = max(len(r[1]) for r in table)
    lines = [f"{r[0]:{w0}s}  {r[1]:{w1}s}  {r[2]}".rstrip() for r in table]
    for run in (a, b):  # a real run's model is about the topology file's network: say when it holds
        if run.summary.prediction_applies:
            lines.append(f"{run.label}: model is {run.summary.prediction_applies}")
    return "\n".join(lines)


def _job(s: RunSummary) -> str:
    return f"{s.model} W={s.workers} P={s.ps} BS={s.batch_size} scale {s.scale}"


def _bct(b: Stats) -> str:
    if not b.n:
        return "- (no measured step)"
    return f"{b.mean:.3f} s +-{b.ci95:.3f} (95% CI, n={b.n})"


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} s"


def _at(xs: list[str], i: int) -> str:
    return xs[i] if i < len(xs) else "-"
