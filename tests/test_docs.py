"""The documentation site: every public name documented, the CLI reference
generated from the parser, the built site complete and readable offline.

The checks that need the built site use ``$DYNNETS_DOCS_HTML`` (``.ci/run``
builds the site with warnings as errors first and points it there) or build
it here into a temporary folder; without Sphinx (the ``docs`` extra) they
skip. The browser test drives Debian's Chromium through Playwright as
``tests/test_serve_browser.py`` does, and skips cleanly without them unless
``DYNNETS_REQUIRE_BROWSER=1``.
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# as tests/test_serve_browser.py: a sandboxed machine without network, as root
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing(reason):
    if os.environ.get("DYNNETS_REQUIRE_BROWSER"):
        pytest.fail(f"{reason} (DYNNETS_REQUIRE_BROWSER is set)")
    pytest.skip(reason)


def _chromium():
    import shutil
    exe = os.environ.get("DYNNETS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        _missing("Chromium is not installed: apt-get install chromium (.ci/run installs it where it is missing)")
    return exe


def _ext(name):
    spec = importlib.util.spec_from_file_location(f"_docs_ext_{name}", DOCS / "_ext" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_public_name_has_a_docstring():
    missing = _ext("publicapi").missing_docstrings()
    assert missing == [], f"{len(missing)} public names without a docstring: {missing[:20]}"


def test_every_public_module_has_an_api_page():
    pages = {p.stem for p in (DOCS / "api").glob("*.rst")}
    assert set(_ext("publicapi").MODULES) <= pages
    index = (DOCS / "api" / "index.md").read_text()
    for page in pages:
        assert re.search(rf"^{re.escape(page)}$", index, re.M), f"api/{page}.rst is not in api/index.md's toctree"


def test_cli_reference_lists_every_command_and_option():
    pytest.importorskip("docutils")
    pytest.importorskip("sphinx")
    from dynnets.cli import build_parser
    cliref = _ext("cliref")
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert {"demo", "train", "eval", "predict", "serve", "compare", "sweep"} <= set(sub.choices)
    for name, parser in sub.choices.items():
        text = "\n".join(cliref._parser_lines(parser, "~"))
        for action in parser._actions:
            if action.help is argparse.SUPPRESS:
                continue
            for flag in action.option_strings:
                assert flag in text, f"dynnets {name}: {flag} is missing from the CLI reference"


def test_figure_commands_are_gathered_from_the_pages():
    fc = _ext("figcommands")
    sections = fc.sections_with_commands((DOCS / "results.md").read_text())
    titles = [t for t, _ in sections]
    assert "`dynnets demo`" in titles and "SST accuracy" in titles
    assert any("experiments/sst_accuracy.py" in c for _, cmds in sections for c in cmds)
    assert fc._slug("Execution strategies: one Tree-LSTM, eight ways of running it") == \
        "execution-strategies-one-tree-lstm-eight-ways-of-running-it"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The folder of the built HTML site."""
    given = os.environ.get("DYNNETS_DOCS_HTML")
    if given:
        html = Path(given)
        assert (html / "index.html").exists(), f"DYNNETS_DOCS_HTML={given} holds no index.html"
        return html
    for mod in ("sphinx", "myst_parser", "furo"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", "html",
                        "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
                       capture_output=True, text=True, cwd=ROOT, timeout=1200,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-4000:]
    return out / "html"


def test_site_has_every_section(site):
    for page in ("index", "getting-started", "tutorials/eager", "tutorials/tree", "tutorials/static",
                 "tutorials/autobatch", "tutorials/padded-vs-dynamic", "tutorials/cnn-transformer", "tutorials/sweeps", "howto/add-primitive",
                 "howto/add-model-kind", "howto/add-compile-pass", "howto/dask-cluster", "howto/reproduce-figures",
                 "howto/installed-use", "cli", "api/index", "api/dynnets", "api/dynnets.nn", "api/dynnets.static",
                 "api/dynnets.data", "api/dynnets.models", "api/dynnets.plots", "results", "benchmarks", "design",
                 "changelog"):
        assert (site / f"{page}.html").exists(), page
    cli = (site / "cli.html").read_text()
    assert "dynnets train" in cli and "--blas-threads" in cli
    api = (site / "api" / "dynnets.nn.html").read_text()
    assert 'id="dynnets.nn.LSTM"' in api


def test_site_needs_no_network(site):
    """Every script, stylesheet, font and picture of every page is a file of the site."""
    remote = re.compile(r"""<(?:script|img|link|source|iframe)\b[^>]*\b(?:src|href)=["'](?:https?:)?//""", re.I)
    for page in site.rglob("*.html"):
        for m in remote.finditer(page.read_text()):
            tag = page.read_text()[m.start():m.start() + 200]
            assert re.match(r"<link\b", tag) is None or "stylesheet" not in tag, f"{page}: {tag}"
            assert not tag.lower().startswith(("<script", "<img", "<source", "<iframe")), f"{page}: {tag}"
    for css in site.rglob("*.css"):
        assert not re.search(r"url\((['\"]?)(https?:)?//", css.read_text()), css


def test_site_in_a_browser_offline(site, tmp_path):
    """Headless Chromium opens the home page and an API page from file://, with
    every network request refused, and finds the title and the navigation."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed: pip install -e '.[test]'")
    exe = _chromium()
    refused = []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=exe, args=CHROMIUM_FLAGS,
                                                   headless=True, viewport={"width": 1280, "height": 900})
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.route("**/*", route)
            page.goto((site / "index.html").as_uri())
            assert page.title().startswith("dynnets")
            nav = page.locator(".sidebar-tree")
            assert nav.is_visible()
            for entry in ("Getting started", "Eager autograd", "How to add a primitive", "CLI reference",
                          "API reference", "Benchmarks", "Design"):
                assert nav.get_by_text(entry, exact=False).first.is_visible(), entry
            # furo's stylesheet applied (a file next to the page): the sidebar is laid out beside the content
            assert page.evaluate("getComputedStyle(document.querySelector('.sidebar-drawer')).display") != "none"
            home = tmp_path / "home.png"
            page.screenshot(path=str(home), full_page=False)

            page.goto((site / "api" / "dynnets.nn.html").as_uri())
            assert "dynnets.nn" in page.title()
            assert page.locator(".sidebar-tree").get_by_text("API reference").first.is_visible()
            lstm = page.locator('dt[id="dynnets.nn.LSTM"]')
            lstm.scroll_into_view_if_needed()
            assert lstm.is_visible() and "LSTM" in lstm.inner_text()
            api = tmp_path / "api.png"
            page.screenshot(path=str(api), full_page=False)
        finally:
            ctx.close()
    assert refused == [], refused
    for shot in (home, api):
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000, shot
    if os.environ.get("DYNNETS_DOCS_SCREENSHOTS"):
        for shot in (home, api):
            (Path(os.environ["DYNNETS_DOCS_SCREENSHOTS"]) / shot.name).write_bytes(shot.read_bytes())
