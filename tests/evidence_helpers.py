"""Builds committed-style results for the reproduction page's tests from tests/fixtures/evidence/:
the summaries, reports and data copied, the PNGs they name drawn with matplotlib (so no binary is
committed), the provenance commits filled in; and a small git repository holding the shipped
files the page's catalogue reads, in two commits, for the stale marks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from replays.evidence import summary_paths
from replays.provenance import REPO

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "evidence"
#: figure files a summary names that the fixture leaves out on purpose (the page says they are missing)
MISSING = {"gone.png"}
UNKNOWN_COMMIT = "0" * 40


def draw_png(path: Path, label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.2, 2.2))
    ax.bar(["a", "b", "c"], [3, 1, 2], color=["C0", "C1", "C2"])
    ax.set_title(label, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=60)
    plt.close(fig)


def build_results(dest: Path, old: str = UNKNOWN_COMMIT, new: str = UNKNOWN_COMMIT) -> Path:
    """dest/results/ from the fixture: COMMIT_OLD -> `old`, COMMIT_NEW -> `new`, PNGs drawn."""
    import json

    results = dest / "results"
    shutil.copytree(FIXTURE / "results", results, dirs_exist_ok=True)
    for path in summary_paths(results):
        path.write_text(path.read_text().replace("COMMIT_OLD", old).replace("COMMIT_NEW", new))
        for name in (json.loads(path.read_text()).get("files") or {}).get("figures") or []:
            if name not in MISSING:
                draw_png(path.parent / name, f"{path.parent.name}/{name}")
    return results


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def init_repo(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "test@example.invalid")
    git(repo, "config", "user.name", "test")
    git(repo, "config", "commit.gpgsign", "false")


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def catalogue_repo(repo: Path) -> tuple[str, str]:
    """A git repository with the files the catalogue reads (figure and matrix files, the papers'
    numbers, the benchmark scripts), committed twice: the second commit changes fig13.yaml.
    Returns (first commit, second commit)."""
    init_repo(repo)
    for folder in ("workloads/figures", "workloads/matrix", "results/reference"):
        shutil.copytree(REPO / folder, repo / folder)
    (repo / "scripts").mkdir()
    for script in (REPO / "scripts").glob("bench_*.sh"):
        shutil.copy(script, repo / "scripts" / script.name)
    first = commit_all(repo, "the shipped files")
    fig13 = repo / "workloads" / "figures" / "fig13.yaml"
    fig13.write_text(fig13.read_text() + "# a change after the result was measured\n")
    return first, commit_all(repo, "fig13.yaml changed")
