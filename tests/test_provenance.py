"""Provenance (replays/provenance.py): the commit and local changes, the machine, the command and
the wall time a result records, read from a real git repository, /proc and the clock."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from replays import provenance
from tests.evidence_helpers import commit_all, git, init_repo


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    init_repo(repo)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "code.py").write_text("x = 1\n")
    (repo / "results" / "reference").mkdir(parents=True)
    (repo / "results" / "reference" / "paper.yaml").write_text("a: 1\n")
    return repo, commit_all(repo, "first")


def test_a_clean_tree_records_its_commit_and_no_changes(tmp_path):
    repo, head = _repo(tmp_path)
    commit, files, dirty = provenance.git_state(repo)
    assert (commit, files, dirty) == (head, {}, False)


def test_local_changes_to_inputs_are_dirty_with_their_content_hashes_and_outputs_are_not(tmp_path):
    repo, head = _repo(tmp_path)
    (repo / "pkg" / "code.py").write_text("x = 2\n")  # modified
    (repo / "pkg" / "new.py").write_text("y = 1\n")  # untracked
    (repo / "results" / "reference" / "paper.yaml").unlink()  # an input under results/, deleted
    (repo / "results" / "fig13").mkdir()
    (repo / "results" / "fig13" / "report.md").write_text("# an output\n")  # outputs never count
    commit, files, dirty = provenance.git_state(repo)
    assert commit == head and dirty
    assert files == {
        "pkg/code.py": git(repo, "hash-object", "pkg/code.py"),
        "pkg/new.py": git(repo, "hash-object", "pkg/new.py"),
        "results/reference/paper.yaml": None,
    }


def test_only_outputs_changed_is_a_clean_tree(tmp_path):
    repo, _ = _repo(tmp_path)
    (repo / "results" / "bench").mkdir()
    (repo / "results" / "bench" / "bct.json").write_text("{}\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "reproduction.md").write_text("# the page testbed report writes\n")
    assert provenance.git_state(repo)[1:] == ({}, False)
    (repo / "docs" / "other.md").write_text("# a document\n")
    assert provenance.git_state(repo)[2] is True


def test_outside_git_there_is_no_commit(tmp_path):
    assert provenance.git_state(tmp_path) == (None, {}, False)


def test_capture_then_finished_gives_the_whole_block(tmp_path):
    repo, head = _repo(tmp_path)
    p = provenance.capture(quick=True, argv=["/x/.venv/bin/testbed", "replay", "fig13", "--quick"], repo=repo)
    assert p.wall_s is None and p.quick and p.mode == "quick"
    time.sleep(0.2)
    done = p.finished()
    assert done.wall_s is not None and 0.2 <= done.wall_s < 30
    assert p.finished(12.5).wall_s == 12.5  # a wall time measured elsewhere (queue time left out)
    assert done.commit == head and not done.dirty
    assert done.command_line == "testbed replay fig13 --quick"
    assert done.machine.cores == os.cpu_count()
    assert done.load_before is not None and done.load_before >= 0
    # the date is ISO 8601 with its offset, and is now
    import datetime

    when = datetime.datetime.fromisoformat(done.date)
    assert when.tzinfo is not None
    assert abs((datetime.datetime.now(datetime.UTC) - when).total_seconds()) < 60
    # what the page reads back: the same block, extra keys kept
    data = done.model_dump() | {"something_new": 1}
    assert provenance.Provenance.model_validate(data).model_dump()["something_new"] == 1


def test_machine_reads_this_machine():
    m = provenance.machine()
    assert m.cores == os.cpu_count()
    total_kb = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line
    )
    assert m.memory_gb == round(total_kb / 2**20, 1) and m.memory_gb > 0
    assert m.cpu and m.cpu == provenance.cpu_model()
    assert m.kernel == subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()


def test_cpu_and_memory_parsers(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\n")
    assert provenance.cpu_model(cpuinfo) == "AMD EPYC 7B13"
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24584444 kB\nMemFree:         1000 kB\n")
    assert provenance.memory_gb(meminfo) == 23.4
    assert provenance.memory_gb(tmp_path / "none") is None


def test_command_lines_read_as_typed():
    cli = str(provenance.REPO / "testbed" / "cli.py")
    assert provenance.command_line([cli, "replay", "fig13"]) == "testbed replay fig13"
    bench = str(provenance.REPO / "benchmarks" / "schemes.py")
    assert provenance.command_line([bench, "--out", "a b"]) == "python -m benchmarks.schemes --out 'a b'"
    assert provenance.command_line(["pytest", "-q"]) == "pytest -q"
