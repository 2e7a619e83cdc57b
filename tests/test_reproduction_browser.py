"""The reproduction gallery (results/index.html) looked at as a person would: opened from disk in
a real headless browser (Debian's chromium, driven by Playwright), every image loaded, every link
resolving, no console error, a screenshot kept in the test's output folder. The page is rendered
from the fixture of committed-style results (tests/fixtures/evidence/), so nothing is emulated;
the committed page (results/index.html as `testbed report` last wrote it) is checked the same way.

scripts/setup.sh installs chromium (apt) and Playwright (pip, requirements.txt). Playwright's own
browser download is not reachable from these machines: it is pointed at /usr/bin/chromium.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from replays import reproduction, reproduction_page
from replays.provenance import REPO
from tests.evidence_helpers import build_results

CHROMIUM = Path("/usr/bin/chromium")
#: as this machine's probe starts it: no sandbox (root), no GPU, no network of its own
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup.sh installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="psnet-chromium-") as profile:
        ctx = p.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield ctx
        finally:
            ctx.close()


def look_at(ctx, page_file: Path, screenshot: Path) -> dict:
    """Open the page from disk; what a reader would meet: console errors, failed loads, the images
    and links it has; a full-page screenshot."""
    page = ctx.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})"))
    page.goto(page_file.as_uri(), wait_until="load")
    images = page.evaluate(
        "Array.from(document.images).map(i => ({src: i.currentSrc || i.src, complete: i.complete, w: i.naturalWidth}))"
    )
    links = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))")
    ids = set(page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
    headings = page.evaluate("Array.from(document.querySelectorAll('h2')).map(h => h.innerText)")
    page.screenshot(path=str(screenshot), full_page=True)
    page.close()
    return {"errors": errors, "images": images, "links": links, "ids": ids, "headings": headings}


def assert_resolves(page_file: Path, seen: dict) -> None:
    assert seen["errors"] == []
    for img in seen["images"]:
        assert img["complete"] and img["w"] > 0, f"image did not load: {img['src']}"
    for href in seen["links"]:
        url = urlparse(href)
        assert url.scheme in ("", "file"), f"a link out of the page's folder tree: {href}"
        if not url.path:
            assert url.fragment in seen["ids"], f"anchor #{url.fragment} is not on the page"
            continue
        target = (page_file.parent / unquote(url.path)).resolve()
        assert target.exists(), f"link {href} -> {target} does not exist"


def test_the_gallery_from_the_fixture_loads_every_image_and_link(browser, tmp_path):
    results = build_results(tmp_path)
    sections = reproduction.collect(results, REPO)
    md, page_file = tmp_path / "docs" / "reproduction.md", results / "index.html"
    reproduction_page.write(sections, md, page_file)
    shot = tmp_path / "reproduction.png"
    seen = look_at(browser, page_file, shot)
    assert_resolves(page_file, seen)
    figures = [f for s in sections for e in s.entries for f in e.figures]
    assert len(seen["images"]) == len(figures) == 6  # fig13 (2), rat-fig6, hips-table1, fig6, old-figure
    assert {Path(unquote(urlparse(i["src"]).path)).name for i in seen["images"]} == {f.name for f in figures}
    assert any(h.endswith("report.md") for h in seen["links"]) and any(h.startswith("#r-") for h in seen["links"])
    assert seen["headings"][:1] == ["Headlines"]
    assert [h.split(" (")[0] for h in seen["headings"][1:]] == [
        "PSNet",
        "RAT",
        "HiPS",
        "PLink",
        "Parameter Flow",
        "The testbed's own",
        "The fidelity verdict on these points",
    ]
    assert shot.stat().st_size > 50_000  # a full page, kept in the test's output folder
    print(f"screenshot: {shot}")


def test_the_committed_gallery_loads_every_image_and_link(browser, tmp_path):
    page_file = REPO / "results" / "index.html"
    if not page_file.exists():
        pytest.fail(f"{page_file} is missing: `testbed report` writes it (and it is committed)")
    seen = look_at(browser, page_file, tmp_path / "committed.png")
    assert_resolves(page_file, seen)
    assert "Headlines" in seen["headings"]
