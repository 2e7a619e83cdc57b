"""What can be reproduced: the seed papers, and every figure, matrix and benchmark the repository ships.

The reproduction page (replays.reproduction) shows one entry per item of this catalogue, measured
or not: every figure file (workloads/figures/*.yaml: its title, its claims in words and the
paper's numbers they name in results/reference/*-paper.yaml), every matrix file
(workloads/matrix/*.yaml) and every benchmark script (scripts/bench_*.sh), each with the command
that runs it. The files are read as plain YAML, not through their schemas (replays.figure,
replays.modelfig, replays.matrix), so the page can be built whatever the figure framework's
version, and a figure file added later (PLink's, Parameter Flow's) appears by itself, under the
paper its name starts with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from replays.figure import GROUPS
from replays.provenance import REPO


@dataclass(frozen=True)
class Paper:
    """A seed paper (None: the testbed's own results: the matrix and the benchmarks)."""

    id: str | None
    name: str
    source: str
    idea: str = ""
    headline: str = ""  # a paper with no figure file yet: its headline claim, and the numbers it states
    numbers: str = ""


PAPERS = [
    Paper(
        "psnet",
        "PSNet",
        "Liu et al., FGCS 2020",
        "electrical circuit switches (ECS) and central routing (CNC) between ToRs and PSs make PS training "
        "faster than on a FatTree; its BCT model (Eqs. 1-7) bounds the measured BCT",
    ),
    Paper(
        "rat",
        "RAT",
        "Wan, Hu, Zhang, ZTE Tech. J. 2020",
        "resilient allreduce trees: one aggregator per oversubscribed region, n trees; far faster than PS under "
        "oversubscription and than Ring under paused senders (NS3 simulation)",
    ),
    Paper(
        "hips",
        "HiPS",
        "Geng et al., NetAI '18",
        "hierarchical synchronisation on server-centric topologies (BCube, Torus) cuts the global "
        "synchronisation time (GST, Table 3's formulas); TCP vs RoCE on two machines (Table 1)",
    ),
    Paper(
        "plink",
        "PLink",
        "Luo et al., MLSys 2020",
        "probing the cloud network's locality, then two-level hierarchical aggregation (2LHA) re-balanced by Autotune",
        "PLink's aggregation speeds up end-to-end training over the frameworks' own",
        "up to 2.3x (1.37-2.27x on Azure, 1.13-1.53x on EC2)",
    ),
    Paper(
        "pf",
        "Parameter Flow",
        "Huawei Research",
        "a PS communication layer: push + broadcast of updates, a value-bounded filter (DVF) and a tree overlay "
        "broadcast (TSB)",
        "Parameter Flow speeds up training over PS-lite",
        "up to 4.3x (dedicated cluster), 8.2x (shared)",
    ),
    Paper(None, "The testbed's own", "this repository", "the topology x scheme matrix and the benchmarks"),
]
PAPER_IDS = [p.id for p in PAPERS]


# --- the catalogue --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpectedClaim:
    """A claim of a figure file, as the page shows it before the figure ran."""

    text: str
    paper_text: str | None = None


@dataclass(frozen=True)
class Expected:
    """Something that can be reproduced: a figure, a matrix or a benchmark, and how."""

    name: str
    kind: str
    paper: str | None
    title: str
    command: str
    source: str = ""  # the file it is defined in, relative to the repository
    statement: str = ""  # the paper's claim in words (results/reference: the figure's `claim`)
    claims: tuple[ExpectedClaim, ...] = ()


def paper_of(name: str) -> str | None:
    """The seed paper a figure file replays, by its name: figN (and psnet-*) PSNet's, rat-* RAT's,
    hips-* HiPS's, plink-*/pf-* those papers' (replays.figure.GROUPS names the first three)."""
    for paper, pattern in GROUPS.items():
        if re.fullmatch(pattern, name):
            return paper
    prefix = name.split("-")[0]
    return prefix if prefix in PAPER_IDS else None


def reference(repo: Path = REPO) -> dict[str, Any]:
    """The papers' numbers: results/reference/*.yaml merged (each figure's entry under its name)."""
    merged: dict[str, Any] = {}
    for path in sorted((repo / "results" / "reference").glob("*.yaml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


def _lookup(ref: dict[str, Any], key: str) -> Any:
    node: Any = ref
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def paper_numbers(value: Any, ratio: bool) -> str | None:
    """The paper's number(s) as text: '25x', or '1.89x (VGG-16), 1.92x (ResNet50)' for one per group."""
    unit = "x" if ratio else ""
    if isinstance(value, int | float):
        return f"{value:g}{unit}"
    if isinstance(value, dict):
        parts = [f"{v:g}{unit} ({k})" for k, v in value.items() if isinstance(v, int | float)]
        return ", ".join(parts) or None
    return None


_PLACEHOLDER = re.compile(r"\{(\w+)(?::[^}]*)?\}")
#: a claim type's text where the file gives none (replays.claims' defaults)
DEFAULT_TEXT = {"faster_than": "{group}: {series} faster than {than}"}


def claim_text(claim: dict[str, Any]) -> str:
    """A figure file's claim in words before it is judged in any group: '{group}: X' reads 'X',
    other placeholders name what fills them."""
    kind = str(claim.get("type", "claim"))
    text = re.sub(r"^\{group\}\s*:?\s*", "", str(claim.get("text") or DEFAULT_TEXT.get(kind, kind)))
    series = claim.get("series")
    names = {
        "group": "each group",
        "series": series[0] if isinstance(series, list) and series else series or "each series",
        "than": claim.get("than", ""),
        "x": "x",
    }
    return _PLACEHOLDER.sub(lambda m: str(names.get(m.group(1), m.group(0))), text)


def _yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def catalogue(repo: Path = REPO) -> list[Expected]:
    """Every figure, matrix and benchmark the repository ships, in page order within each kind."""
    ref = reference(repo)
    out: list[Expected] = []
    for path in sorted((repo / "workloads" / "figures").glob("*.yaml"), key=lambda p: _natural(p.stem)):
        data = _yaml(path)
        name = path.stem
        entry = ref.get(name) if isinstance(ref.get(name), dict) else {}
        claims = tuple(
            ExpectedClaim(
                claim_text(c),
                paper_numbers(_lookup(ref, c["paper"]), c.get("type") == "faster_than") if c.get("paper") else None,
            )
            for c in data.get("claims") or []
            if isinstance(c, dict)
        )
        out.append(
            Expected(
                name=name,
                kind="model-figure" if data.get("mode") == "model" else "figure",
                paper=paper_of(name),
                title=str(data.get("title", name)),
                command=f"testbed replay {name}",
                source=str(path.relative_to(repo)),
                statement=str(entry.get("claim", "")),
                claims=claims,
            )
        )
    for path in sorted((repo / "workloads" / "matrix").glob("*.yaml")):
        data = _yaml(path)
        if "matrix" not in data:
            continue
        default = path.name == "matrix.yaml"
        out.append(
            Expected(
                name=str(data["matrix"]),
                kind="matrix",
                paper=None,
                title=str(data.get("title", data["matrix"])),
                command="testbed matrix" if default else f"testbed matrix {path.relative_to(repo)}",
                source=str(path.relative_to(repo)),
            )
        )
    for path in sorted((repo / "scripts").glob("bench_*.sh")):
        name = path.stem.removeprefix("bench_")
        out.append(
            Expected(
                name=name,
                kind="benchmark",
                paper=None,
                title=_script_title(path) or f"{name} benchmark",
                command=f"scripts/{path.name}",
                source=str(path.relative_to(repo)),
            )
        )
    return out


def _script_title(path: Path) -> str:
    """A benchmark script's title: its first comment line up to the colon."""
    for line in path.read_text().splitlines()[1:4]:
        if line.startswith("# "):
            return line[2:].split(":")[0].strip()
    return ""
