"""Which of the repository's modules a run can execute: the import closure of its entry modules.

`testbed report` marks a result stale where a file it depends on changed (replays.staleness). Its
dependencies are folders (emulation/, controller/, ...), so a module no run imports (the cluster
edition, a placement tool) would stale every result each time it changed. A result's code is the
modules reachable from its entry modules, so a changed module outside that closure (at the
result's commit and now) is not a change to it.

Edges, found with `ast` in each module's source:
- every `import a.b` and `from a.b import c` anywhere in the module, functions included (lazy
  imports run too); `a/__init__.py` and `a/b/__init__.py` come with them, as Python loads them;
  `from a import b` reaches `a/b.py` where that is a module;
- every string constant that names one of the repository's modules (`"engine.host"` in a
  `python -m engine.host` command line, `"controller.ecs"` in os-ken's app list): a module
  started in another process or loaded by name is code the run executes.

Why no library: the closure is needed at past commits, read from git objects rather than from an
installed tree (grimp and modulegraph walk a package on disk), and with the string-constant edges
that a subprocess-heavy emulator needs, which import graphs do not draw.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path


def module_path(name: str, files: Iterable[str] | set[str]) -> str | None:
    """The repository file of dotted module `name` (a.b → a/b.py or a/b/__init__.py), or None."""
    base = name.replace(".", "/")
    for cand in (f"{base}.py", f"{base}/__init__.py"):
        if cand in files:
            return cand
    return None


def _package_of(path: str) -> str:
    """Dotted package a file's relative imports start from."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1])


def _dotted(value: object) -> bool:
    """Could this constant be a module's dotted name ("engine.host")?"""
    return isinstance(value, str) and "." in value and value.replace(".", "").replace("_", "").isalnum()


def edges(path: str, source: str, files: set[str] | frozenset[str]) -> set[str]:
    """Repository files the module at `path` imports or names (see the module doc)."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = _package_of(path).split(".")
                pkg = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                base = ".".join([*pkg, base] if base else pkg)
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
        elif isinstance(node, ast.Constant) and _dotted(node.value):
            names.add(node.value)
    out: set[str] = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a.b.c loads a, a.b and a.b.c
            found = module_path(".".join(parts[:i]), files)
            if found:
                out.add(found)
    out.discard(path)
    return out


@lru_cache(maxsize=4096)
def _edges_cached(path: str, source: str, files: frozenset[str]) -> frozenset[str]:
    return frozenset(edges(path, source, files))


def closure(sources: Mapping[str, str], roots: Iterable[str]) -> set[str]:
    """Every module reachable from `roots` (repository paths) over `edges`; roots included."""
    files = frozenset(sources)
    seen: set[str] = set()
    todo = [r for r in roots if r in files]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(_edges_cached(p, sources[p], files) - seen)
    return seen


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin.encode() if stdin is not None else None,
        capture_output=True,
        check=False,
        timeout=60,
    )


def sources_at(repo: Path, rev: str) -> dict[str, str]:
    """Every Python file's source at commit `rev` (one `git cat-file --batch` call); {} if unknown.
    A name that moves (HEAD, a branch) is resolved first, so the cache holds commits only."""
    sha = _git(repo, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
    return _sources_at_commit(repo, sha.stdout.decode().strip()) if sha.returncode == 0 else {}


@lru_cache(maxsize=64)
def _sources_at_commit(repo: Path, rev: str) -> dict[str, str]:
    listing = _git(repo, "ls-tree", "-r", "-z", "--name-only", rev)
    if listing.returncode != 0:
        return {}
    paths = [p for p in listing.stdout.decode().split("\0") if p.endswith(".py") and not p.startswith(".")]
    batch = _git(repo, "cat-file", "--batch", stdin="".join(f"{rev}:{p}\n" for p in paths))
    out: dict[str, str] = {}
    data, pos = batch.stdout, 0
    for p in paths:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) != 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        out[p] = data[pos : pos + size].decode("utf-8", "replace")
        pos += size + 1
    return out


def closure_at(repo: Path, rev: str, roots: tuple[str, ...]) -> frozenset[str]:
    """`closure` of `roots` in the tree of commit `rev` (cached per commit: a report asks for the
    same few commits over and over)."""
    sha = _git(repo, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
    return _closure_at_commit(repo, sha.stdout.decode().strip(), roots) if sha.returncode == 0 else frozenset()


@lru_cache(maxsize=256)
def _closure_at_commit(repo: Path, sha: str, roots: tuple[str, ...]) -> frozenset[str]:
    return frozenset(closure(_sources_at_commit(repo, sha), roots))
