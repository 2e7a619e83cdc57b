"""Flow-model scale benchmark: one simulated iteration per topology kind at ~100, ~1k and ~10k
hosts; wall time and max RSS of each part (model building and routing, the SimGrid subprocess).

Each point runs in its own process (`--point`), so its max RSS is its own, and the SimGrid part
in a subprocess of that one (models.flow.simgrid). Writes results/bench/scale.json and
scale.md. No emulation: runs as any user, beside emulations (it competes for the 2 cores).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.common import TOP, depends_on, finish, fmt, md_table, meta, setup_logging, write_summary
from schemes import registry
from topologies.files import write_text_atomic

LOG = logging.getLogger("bench.scale")
SIZES = ("100", "1k", "10k")
#: the schedule's message count above which a scheme is not run (ring: 2 W (W - 1) messages)
MAX_MESSAGES = 2_500_000
PS = 4  # FatTree and BCube PSs; PSNet has one per module
#: the points results/bench/scale.md records: the TF PS job and the ring (any scheme with a
#: message count, schemes.registry SchemeSpec.messages, can be asked for with --schemes)
DEFAULT_SCHEMES = ("tf-ps", "ring")


#: the size names and the host counts a kind grows its prototype to (topologies.model.Kind.grown)
HOSTS = {"100": 100, "1k": 1000, "10k": 10000}


def topology_sets(kind: str, size: str) -> tuple[str, list[str]]:
    """The shipped prototype file of `kind` and the overrides (`--set key=value`) that grow it to `size` hosts."""
    from topologies import kinds

    grown = kinds.get(kind).grown(HOSTS[size], PS)
    if grown is None:
        raise ValueError(f"kind {kind} has no growth to {size} hosts (Kind.grown)")
    topo, fields = grown
    return topo, [f"{k}={json.dumps(v)}" for k, v in fields.items()]


def grown_kinds() -> list[str]:
    """The kinds that grow a prototype to every size (Kind.grown), in registry order."""
    from topologies import kinds

    return [k.name for k in kinds.KINDS.values() if all(k.grown(h, PS) for h in HOSTS.values())]


def scheme_messages(kind: str, size: str, scheme: str) -> int:
    """Messages one iteration has, before building anything (to skip what cannot fit)."""
    w = HOSTS[size] - PS
    return registry.get(scheme).messages(w, PS)  # type: ignore[misc]


def run_point(kind: str, size: str, scheme: str, tmp: Path) -> dict:
    """One point in this process: plan, route, simulate; times and memory."""
    from models.flow.simgrid import peak_rss_mb
    from runs.simulate import plan, run

    topo, sets = topology_sets(kind, size)
    exp = tmp / f"scale-{kind}.yaml"
    exp.write_text(yaml.safe_dump({"topology": str(TOP / "topologies" / topo), "job": {"model": "vgg16"}}))
    t0 = time.perf_counter()
    p = plan(exp, sets, scheme=scheme)
    t1 = time.perf_counter()
    o = run(p, calibrated=False)  # exact max-min: its iteration is checked against the busiest cable
    t2 = time.perf_counter()
    r = o.result
    return {
        "kind": kind,
        "size": size,
        "scheme": scheme,
        "hosts": len(p.net.hosts()),
        "cables_in_model": len(p.net.links),
        "messages": r.messages,
        "cables_used": r.links,
        "build_s": t1 - t0,
        "traffic_s": o.traffic_s,
        "routes_s": o.routes.seconds,
        "routes_exact": o.routes.exact,
        "sim_platform_s": r.platform_s,
        "sim_run_s": r.run_s,
        "sim_wall_s": r.wall_s,
        "sim_rss_mb": r.max_rss_mb,
        "model_rss_mb": peak_rss_mb(),
        "total_s": t2 - t0,
        "iteration_s": r.iteration_s,
        "bound_s": o.bound_s,
    }


def point_in_subprocess(kind: str, size: str, scheme: str, tmp: Path) -> dict:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "benchmarks.scale", "--point", kind, size, scheme, "--tmp", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=TOP)
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        LOG.warning("%s %s %s failed: %s", kind, size, scheme, tail)
        return {"kind": kind, "size": size, "scheme": scheme, "error": tail}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_s"] = time.perf_counter() - t0
    return res


def table(rows: list[dict]) -> str:
    head = [
        "kind",
        "hosts",
        "traffic",
        "messages",
        "build + routes (s)",
        "SimGrid (s)",
        "whole point (s)",
        "max RSS model / SimGrid (MB)",
        "simulated iteration (s)",
        "busiest-cable bound (s)",
    ]
    out = []
    for r in rows:
        if "error" in r or "skipped" in r:
            out.append(
                [
                    r["kind"],
                    r["size"],
                    r["scheme"],
                    fmt(r.get("messages"), "d"),
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    r.get("error") or r["skipped"],
                ]
            )
            continue
        out.append(
            [
                r["kind"],
                str(r["hosts"]),
                r["scheme"],
                str(r["messages"]),
                f"{r['build_s']:.2f} + {r['routes_s']:.2f}",
                fmt(r["sim_wall_s"]),
                fmt(r.get("process_s", r["total_s"])),
                f"{r['model_rss_mb']:.0f} / {r['sim_rss_mb']:.0f}",
                fmt(r["iteration_s"], ".3f"),
                fmt(r["bound_s"], ".3f"),
            ]
        )
    return md_table(head, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bench", help="folder for scale.json and scale.md")
    ap.add_argument("--quick", action="store_true", help="the ~100-host points only")
    growing = grown_kinds()
    ap.add_argument("--kinds", nargs="+", default=growing, choices=growing)
    ap.add_argument("--sizes", nargs="+", default=None, choices=SIZES)
    counted = [s.name for s in registry.SCHEMES.values() if s.messages is not None]
    ap.add_argument("--schemes", nargs="+", default=list(DEFAULT_SCHEMES), choices=counted)
    ap.add_argument("--point", nargs=3, metavar=("KIND", "SIZE", "SCHEME"), help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default=None, help=argparse.SUPPRESS)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    tmp = Path(args.tmp) if args.tmp else out / "scale-inputs"
    tmp.mkdir(parents=True, exist_ok=True)
    if args.point:
        print(json.dumps(run_point(*args.point, tmp)))
        return 0
    setup_logging(args.verbose)
    started, t0 = meta(args), time.monotonic()
    sizes = ["100"] if args.quick else (args.sizes or list(SIZES))
    rows = []
    for scheme in args.schemes:
        for size in sizes:
            for kind in args.kinds:
                n = scheme_messages(kind, size, scheme)
                if n > MAX_MESSAGES:
                    rows.append(
                        {
                            "kind": kind,
                            "size": size,
                            "scheme": scheme,
                            "messages": n,
                            "skipped": f"not run: {n:.2g} messages",
                        }
                    )
                    LOG.info("%s %s %s: skipped (%d messages)", kind, size, scheme, n)
                    continue
                r = point_in_subprocess(kind, size, scheme, tmp)
                rows.append(r)
                LOG.info(
                    "%s %s %s: %s",
                    kind,
                    size,
                    scheme,
                    {k: v for k, v in r.items() if k.endswith("_s") or k.endswith("_mb")},
                )
    out.mkdir(parents=True, exist_ok=True)
    res = {"meta": started | {"wall_s": time.monotonic() - t0}, "points": rows}
    finish(res)
    write_text_atomic(out / "scale.json", json.dumps(res, indent=1))
    md = "# Flow-model scale (one iteration, SimGrid 3.32 CM02 max-min)\n\n" + table(rows) + "\n"
    write_text_atomic(out / "scale.md", md)
    write_summary(out, "scale", "Flow-model scale benchmark", res, args.quick, depends_on("scale"))
    print(md)
    slow = [r for r in rows if r.get("process_s", 0) > 60]
    print(
        f"{len(rows)} points; {len(slow)} above 60 s"
        + (f": {[(r['kind'], r['size'], r['scheme']) for r in slow]}" if slow else "")
    )
    return 0 if not any("error" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
