"""Staleness (replays/staleness.py) in a real git repository with two commits: a result is stale
where a file it depends on changed between its commit and HEAD, current where none did or where
the change was already in the tree it ran on, of unknown provenance where git does not know its
commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from replays import provenance
from replays.evidence import Tree
from replays.staleness import CURRENT, DRAWING, JUDGES, STALE, UNKNOWN, result_staleness, staleness
from tests.evidence_helpers import commit_all, git, init_repo


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """(repo, first commit, second commit): the second changes pkg/x.py and notes.txt only."""
    r = tmp_path / "repo"
    init_repo(r)
    (r / "pkg").mkdir()
    (r / "pkg" / "x.py").write_text("x = 1\n")
    (r / "pkg" / "y.py").write_text("y = 1\n")
    (r / "fig.yaml").write_text("title: a\n")
    (r / "notes.txt").write_text("a\n")
    first = commit_all(r, "first")
    (r / "pkg" / "x.py").write_text("x = 2\n")
    (r / "notes.txt").write_text("b\n")
    return r, first, commit_all(r, "second")


def test_unchanged_dependencies_are_current(repo):
    r, first, _ = repo
    s = staleness(first, ["fig.yaml", "pkg/y.py"], repo=r)
    assert (s.state, s.changed) == (CURRENT, [])
    assert s.text.startswith("current")


def test_a_changed_folder_makes_it_stale_naming_the_file(repo):
    r, first, second = repo
    s = staleness(first, ["fig.yaml", "pkg/"], repo=r)
    assert (s.state, s.changed) == (STALE, ["pkg/x.py"])
    assert s.text == "stale: pkg/x.py changed since it ran"
    assert staleness(second, ["fig.yaml", "pkg/"], repo=r).state == CURRENT  # re-run on the new commit


def test_a_file_added_since_is_not_a_change_unless_the_result_lists_its_folder(repo):
    """A new module can act only through an import in a file that existed (which then changed
    itself), a new YAML only by being named: adding pkg/z.py or pkg/new.yaml leaves a result
    current. A result that lists the folder (a glob dependency, as staleness.TOPOLOGY_FILES) is
    stale by the new YAML; a removed module stales every result that depends on it."""
    r, _, second = repo
    (r / "pkg" / "z.py").write_text("z = 1\n")
    third = commit_all(r, "a module nothing imports yet")
    assert staleness(second, ["pkg/"], repo=r).state == CURRENT
    (r / "pkg" / "new.yaml").write_text("a: 1\n")
    commit_all(r, "a file only a folder listing would find")
    assert staleness(third, ["pkg/"], repo=r).state == CURRENT
    s = staleness(third, ["pkg/", "pkg/*.yaml"], repo=r)
    assert (s.state, s.changed) == (STALE, ["pkg/new.yaml"])
    git(r, "rm", "-q", "pkg/y.py")
    git(r, "commit", "-qm", "a module removed")
    assert staleness(second, ["pkg/"], repo=r).changed == ["pkg/y.py"]
    assert staleness(second, ["pkg/", "pkg/*.yaml"], repo=r).changed == ["pkg/new.yaml", "pkg/y.py"]


def test_an_untracked_file_a_run_saw_is_no_change_once_removed_unless_listed(repo):
    """A run recorded an untracked file under a folder it depends on (a scratch YAML, say) as a
    local change; once the file is gone, nothing the result read has changed. A result that
    lists the folder may have run it: stale. Had the file been committed with other content, it
    would be a change either way."""
    r = repo[0]
    (r / "pkg" / "scratch.yaml").write_text("a: 1\n")
    prov = provenance.capture(repo=r)
    assert prov.dirty and "pkg/scratch.yaml" in prov.dirty_files
    (r / "pkg" / "scratch.yaml").unlink()
    assert staleness(prov.commit, ["pkg/"], prov.dirty_files, repo=r).state == CURRENT
    s = staleness(prov.commit, ["pkg/", "pkg/*.yaml"], prov.dirty_files, repo=r)
    assert (s.state, s.changed) == (STALE, ["pkg/scratch.yaml"])
    (r / "pkg" / "scratch.yaml").write_text("a: 2\n")
    commit_all(r, "the scratch file, edited, committed")
    assert staleness(prov.commit, ["pkg/"], prov.dirty_files, repo=r).changed == ["pkg/scratch.yaml"]


def test_the_code_that_judges_staleness_is_no_change_to_what_a_run_measured(tmp_path):
    """Every replay imports replays/staleness.py (a resumed sweep asks it), but a change to it
    changes what the page says, not a measured number: current. A change beside it is a change."""
    r = tmp_path / "repo"
    init_repo(r)
    (r / "replays").mkdir()
    for name in ("staleness.py", "imports.py", "sweep.py"):
        (r / "replays" / name).write_text("a = 1\n")
    (r / "replays" / "framework.py").write_text("from replays import imports, staleness, sweep\n")  # ENTRIES
    first = commit_all(r, "first")
    for name in JUDGES:
        (r / name).write_text("a = 2\n")
    commit_all(r, "how staleness is judged")
    assert staleness(first, ["replays/"], repo=r).state == CURRENT
    (r / "replays" / "sweep.py").write_text("a = 2\n")
    commit_all(r, "what a sweep runs")
    assert staleness(first, ["replays/"], repo=r).changed == ["replays/sweep.py"]


def test_the_reproduction_page_template_is_no_change_to_what_a_run_measured(tmp_path):
    """`testbed report` draws the page with a template under replays/templates/, a file no run
    reads and no import reaches: a replay that depends on the whole replays/ folder stays current
    when the template changes. Another data file in the folder still counts."""
    r = tmp_path / "repo"
    init_repo(r)
    (r / "replays" / "templates").mkdir(parents=True)
    (r / "replays" / "framework.py").write_text("a = 1\n")  # ENTRIES
    (r / "replays" / "templates" / "reproduction.html.j2").write_text("<h1>{{ title }}</h1>\n")
    (r / "replays" / "axes.yaml").write_text("x: 1\n")
    first = commit_all(r, "first")
    (r / "replays" / "templates" / "reproduction.html.j2").write_text("<h1>{{ title }}</h1><h2>verdict</h2>\n")
    commit_all(r, "a section on the page")
    assert staleness(first, ["replays/"], repo=r).state == CURRENT
    (r / "replays" / "axes.yaml").write_text("x: 2\n")
    commit_all(r, "a file a replay could read")
    assert staleness(first, ["replays/"], repo=r).changed == ["replays/axes.yaml"]


def test_comments_and_docstrings_are_not_a_change_but_code_is(repo):
    """A module edited only in its docstrings and comments computes what it did: the result stays
    current. A changed statement, or a docstring turned into code, stales it."""
    r, _, second = repo
    (r / "pkg" / "x.py").write_text('"""What x is."""\n\nx = 2  # two\n\n\ndef f():\n    """f."""\n    return x\n')
    third = commit_all(r, "a docstring, a comment and a function")
    said = '"""What x is, said better."""\n\nx = 2\n\n\ndef f():\n'
    (r / "pkg" / "x.py").write_text(said + '    """f, said."""\n    return x\n')
    fourth = commit_all(r, "docstrings and a comment only")
    assert staleness(third, ["pkg/"], repo=r).state == CURRENT
    (r / "pkg" / "x.py").write_text(said + "    return x + 1\n")
    commit_all(r, "code")
    for since in (third, fourth):
        s = staleness(since, ["pkg/"], repo=r)
        assert (s.state, s.changed) == (STALE, ["pkg/x.py"])
    assert staleness(second, ["pkg/"], repo=r).state == STALE  # a function added since: code


def test_a_folder_readme_is_prose_unless_a_dependency_names_it(repo):
    """A markdown file in a dependency folder (its README) is read by people, not by a run: editing
    it leaves a result current. Named as a dependency of its own, it counts."""
    r, _, second = repo
    (r / "pkg" / "README.md").write_text("how pkg works\n")
    commit_all(r, "a folder README")
    assert staleness(second, ["pkg/"], repo=r).state == CURRENT
    s = staleness(second, ["pkg/", "pkg/README.md"], repo=r)
    assert (s.state, s.changed) == (STALE, ["pkg/README.md"])


def test_unknown_or_missing_commits(repo, tmp_path):
    r, _, _ = repo
    s = staleness("1234567890" * 4, ["pkg/"], repo=r)
    assert s.state == UNKNOWN and "1234567890 is not in this repository" in s.text
    assert staleness(None, ["pkg/"], repo=r).state == UNKNOWN
    outside = staleness("1234567890" * 4, ["pkg/"], repo=tmp_path / "nothing")
    assert outside.state == UNKNOWN


def test_a_change_run_before_it_was_committed_is_not_a_change_since(repo):
    """The result ran on the first commit with the second's pkg/x.py as a local change (a re-run
    committed together with the change that moved it): current."""
    r, first, _ = repo
    git(r, "checkout", "-q", first)
    (r / "pkg" / "x.py").write_text("x = 2\n")  # the change, not committed yet
    prov = provenance.capture(repo=r)
    assert prov.dirty and set(prov.dirty_files) == {"pkg/x.py"}
    git(r, "checkout", "-q", "pkg/x.py")
    git(r, "checkout", "-q", "main")
    assert prov.commit == first
    s = staleness(prov.commit, ["pkg/"], prov.dirty_files, repo=r)
    assert s.state == CURRENT, s


def test_a_local_change_that_head_does_not_hold_is_stale(repo):
    r, _, second = repo
    (r / "pkg" / "y.py").write_text("y = 'an experiment never committed'\n")
    prov = provenance.capture(repo=r)
    git(r, "checkout", "-q", "pkg/y.py")
    s = staleness(prov.commit, ["pkg/"], prov.dirty_files, repo=r)
    assert prov.commit == second and (s.state, s.changed) == (STALE, ["pkg/y.py"])
    # a local change outside what the result depends on does not matter
    assert staleness(prov.commit, ["fig.yaml"], prov.dirty_files, repo=r).state == CURRENT


def test_the_mark_names_three_files_then_counts(tmp_path):
    r = tmp_path / "repo"
    init_repo(r)
    for i in range(5):
        (r / f"f{i}.txt").write_text("a\n")
    first = commit_all(r, "first")
    for i in range(5):
        (r / f"f{i}.txt").write_text("b\n")
    commit_all(r, "second")
    s = staleness(first, ["."], repo=r)
    assert s.changed == [f"f{i}.txt" for i in range(5)]
    assert s.text == "stale: f0.txt, f1.txt, f2.txt and 2 more changed since it ran"


def test_a_module_no_entry_reaches_is_not_a_change(tmp_path):
    """Code is what a run imports (replays.imports): with an entry module named, a changed module
    in a dependency folder counts only where the entry reaches it, by an import (a lazy one in a
    function too) or by a string naming it (`python -m pkg.sub`); an unreached one stales nothing."""
    r = tmp_path / "repo"
    init_repo(r)
    (r / "pkg").mkdir()
    (r / "pkg" / "__init__.py").write_text("")
    (r / "pkg" / "entry.py").write_text(
        "from pkg import used\n\ndef go():\n    from pkg.lazy import f\n    return ['python', '-m', 'pkg.sub']\n"
    )
    for name in ("used", "lazy", "sub", "unused"):
        (r / "pkg" / f"{name}.py").write_text("v = 1\n")
    first = commit_all(r, "first")
    (r / "pkg" / "unused.py").write_text("v = 2\n")
    second = commit_all(r, "a module the entry never reaches")
    assert staleness(first, ["pkg/entry.py", "pkg/"], repo=r).state == CURRENT
    assert staleness(first, ["pkg/"], repo=r).changed == ["pkg/unused.py"]  # no entry named: the folder rule
    for name in ("used", "lazy", "sub"):
        (r / "pkg" / f"{name}.py").write_text("v = 3\n")
    commit_all(r, "modules it reaches")
    s = staleness(second, ["pkg/entry.py", "pkg/"], repo=r)
    assert (s.state, s.changed) == (STALE, ["pkg/lazy.py", "pkg/sub.py", "pkg/used.py"])
    # an import added since reaches the module now: its change counts (the closure now, not only then)
    (r / "pkg" / "entry.py").write_text("import pkg.unused\n")
    (r / "pkg" / "unused.py").write_text("v = 4\n")
    commit_all(r, "the entry imports it now")
    assert "pkg/unused.py" in staleness(second, ["pkg/entry.py", "pkg/"], repo=r).changed


def test_a_figures_kind_names_where_its_code_starts():
    """A figure that depends on the whole replays/ folder starts where its kind is evaluated: an
    emulated figure at the sweep and its report, a model figure at its evaluator, a scheme figure
    (a model figure naming runs/simulate.py) at the scheme evaluator; a kind not listed, and no
    kind, at the replay framework. Files a result names are entries whatever its kind."""
    from replays.staleness import ENTRIES, KIND_ENTRIES, entry_modules

    deps = ["workloads/figures/x.yaml", "replays/", "runs/"]
    assert entry_modules(deps, "figure") == KIND_ENTRIES["figure"]
    assert entry_modules(deps, "model-figure") == ("replays/modelreplay.py", "replays/modelfig_report.py")
    assert entry_modules([*deps, "runs/simulate.py"], "model-figure") == (
        "runs/simulate.py", *KIND_ENTRIES["scheme-figure"],
    )  # fmt: skip
    assert entry_modules(deps, None) == ENTRIES == entry_modules(deps, "benchmark")
    assert entry_modules(["workloads/figures/x.yaml"], "figure") == ()  # no replays/ folder: the folder rule


def test_drawing_code_counts_since_the_tree_that_drew_the_report(tmp_path):
    """An emulated figure's points ran on `first`; its claims code (DRAWING) changed since. Drawn
    by the points' tree, it is stale by drawing code alone (`redraw`: kept runs redrawn);
    redrawn on the new tree (the summary's `drawn`), current. A platform change after that is a
    change since it ran, whatever tree drew it; a drawn tree git does not know counts for nothing."""
    r = tmp_path / "repo"
    init_repo(r)
    for d in ("replays", "runs"):
        (r / d).mkdir()
        (r / d / "__init__.py").write_text("")
    (r / "replays" / "sweep.py").write_text("from replays import report\nfrom runs import engine\n")
    (r / "replays" / "report.py").write_text("from replays import claims\n")
    for name in ("replays/claims.py", "runs/engine.py", "runs/predict.py", "runs/steptime.py"):
        (r / name).write_text("a = 1\n")
    deps = ["fig.yaml", "replays/", "runs/"]
    (r / "fig.yaml").write_text("title: a\n")
    first = commit_all(r, "the points ran here")
    assert "replays/claims.py" in DRAWING and "replays/report.py" in DRAWING
    (r / "replays" / "claims.py").write_text("a = 2\n")
    second = commit_all(r, "how a claim is judged")

    s = result_staleness(first, deps, repo=r, kind="figure")
    assert (s.state, s.changed, s.redraw) == (STALE, ["replays/claims.py"], True)
    assert s.text == (
        "stale: replays/claims.py changed since it was drawn; drawing code only: a replay without --fresh "
        "keeps its runs (where its points/ folder has them) and redraws it"
    )
    assert staleness(first, deps, repo=r, kind="figure").changed == ["replays/claims.py"]  # the plain rule
    redrawn = Tree(commit=second)
    assert result_staleness(first, deps, drawn=redrawn, repo=r, kind="figure").state == CURRENT

    (r / "runs" / "engine.py").write_text("a = 2\n")
    commit_all(r, "what a run measures")
    s = result_staleness(first, deps, drawn=redrawn, repo=r, kind="figure")
    assert (s.state, s.changed, s.redraw) == (STALE, ["runs/engine.py"], False)
    assert s.text == "stale: runs/engine.py changed since it ran"
    (r / "replays" / "claims.py").write_text("a = 3\n")
    commit_all(r, "the claims again")
    s = result_staleness(first, deps, drawn=redrawn, repo=r, kind="figure")
    assert (s.changed, s.redraw) == (["replays/claims.py", "runs/engine.py"], False)

    unknown = Tree(commit="0" * 40)
    assert result_staleness(second, deps, drawn=unknown, repo=r, kind="figure").changed == [
        "replays/claims.py", "runs/engine.py",
    ]  # fmt: skip
    assert result_staleness("0" * 40, deps, drawn=redrawn, repo=r).state == UNKNOWN
