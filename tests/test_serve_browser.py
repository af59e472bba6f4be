"""The ``dynnets serve`` page in a real browser: headless Chromium driven by Playwright.

Types a sentence, submits it, and checks the tree picture against the JSON
endpoint: as many node groups as the prediction has nodes, the root drawn in
the colour of its predicted class, the prediction shown; the labels as the
browser laid them out fit their boxes and do not overlap; a bad tree shows its
one-line reason and the page goes on working.

Needs Playwright for Python (the ``test`` extra) and Debian's Chromium
(``apt-get install chromium``; ``.ci/run`` installs it where it is missing);
Playwright's own browser downloads are never used. Without them the test
skips, saying what is missing, unless ``DYNNETS_REQUIRE_BROWSER=1`` (set by
``.ci/run``), where it fails instead.
"""
import http.client
import json
import os
import shutil
import threading

import pytest

from dynnets.data import Vocabulary, load_samples
from dynnets.models import build_model
from dynnets.plots import palette
from dynnets.serve import make_server
from dynnets.train import load_checkpoint, save_checkpoint

#: The flags a sandboxed machine without network needs (no background connections, no sandbox as root).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
GOOD = "the film is not good , but the acting is great ."


def _missing(reason):
    if os.environ.get("DYNNETS_REQUIRE_BROWSER"):
        pytest.fail(f"{reason} (DYNNETS_REQUIRE_BROWSER is set)")
    pytest.skip(reason)


def _chromium():
    exe = os.environ.get("DYNNETS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        _missing("Chromium is not installed: apt-get install chromium (.ci/run installs it where it is missing)")
    return exe


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed: pip install -e '.[test]'")
    exe = _chromium()
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path_factory.mktemp("chromium-profile")),
                                                   executable_path=exe, args=CHROMIUM_FLAGS, headless=True,
                                                   viewport={"width": 1280, "height": 900})
        try:
            yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    path = tmp_path_factory.mktemp("browser") / "best.npz"
    save_checkpoint(path, build_model("treelstm", len(vocab), embed_dim=8, hidden=8, seed=0), vocab)
    srv = make_server(load_checkpoint(path), port=0, quiet=True)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    t.join(10)


def _json(srv, text):
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=30)
    conn.request("POST", "/predict", body=json.dumps({"text": text, "nodes": True}),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    out = json.loads(r.read())[0]
    conn.close()
    return out


def _rgb(hex_colour):
    return "rgb(" + ", ".join(str(int(hex_colour[k:k + 2], 16)) for k in (1, 3, 5)) + ")"


LAYOUT_JS = """() => {
  const out = [];
  for (const g of document.querySelectorAll('#tree svg g.node.leaf')) {
    const r = g.querySelector('rect:not(.mismatch)').getBBox();
    const t = g.querySelector('text').getBBox();
    out.push({box: [r.x, r.y, r.x + r.width, r.y + r.height], text: [t.x, t.y, t.x + t.width, t.y + t.height]});
  }
  return out;
}"""


def _submit(page, text):
    page.fill("#sentence", text)
    page.click("#submit")


def test_page_shows_the_tree_and_prediction_of_a_typed_sentence(browser_page, server):
    page = browser_page
    host, port = server.server_address[:2]
    page.goto(f"http://{host}:{port}/")
    assert page.title() == "dynnets: try a sentence"
    _submit(page, GOOD)
    page.wait_for_selector("#tree svg g.node", timeout=30000)
    rec = _json(server, GOOD)
    k = max(range(len(rec["root"])), key=rec["root"].__getitem__)
    assert page.locator("#tree svg g.node").count() == len(rec["nodes"]) == 2 * len(rec["words"]) - 1
    assert page.locator("#tree svg g.node.leaf").count() == len(rec["words"])
    root = page.locator('#tree svg g.node[data-root="1"] circle')
    fill = root.evaluate("e => getComputedStyle(e).fill")
    assert rec["nodes"][0]["pred"] == k
    assert fill == _rgb(palette(len(rec["root"]))[k])
    assert page.locator("#predicted").get_attribute("data-pred") == str(k)
    assert page.locator("#predicted").inner_text().startswith(f"predicted: {k} ")
    words = page.locator("#tree svg g.node.leaf text").all_text_contents()
    assert words == rec["words"]
    # as the browser set them: every word inside its box, no two boxes overlapping
    boxes = page.evaluate(LAYOUT_JS)
    for b in boxes:
        assert b["box"][0] <= b["text"][0] and b["text"][2] <= b["box"][2], b
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            x = a["box"][0] < b["box"][2] and b["box"][0] < a["box"][2]
            y = a["box"][1] < b["box"][3] and b["box"][1] < a["box"][3]
            assert not (x and y), (a, b)


def test_page_shows_a_bad_tree_s_reason_and_goes_on(browser_page, server):
    page = browser_page
    host, port = server.server_address[:2]
    page.goto(f"http://{host}:{port}/")
    _submit(page, "(3 (2 it) (9 good))")
    page.wait_for_function("document.getElementById('error').textContent.length > 0", timeout=30000)
    err = page.locator("#error").inner_text()
    assert "column 12" in err and "0..4" in err and "\n" not in err
    _submit(page, "(3 (2 it) (3 good))")
    page.wait_for_selector("#tree svg g.node", timeout=30000)
    assert page.locator("#tree svg g.node").count() == 3
    assert page.locator("#error").inner_text() == ""
    gold = page.locator('#tree svg g.node[data-root="1"]').get_attribute("data-gold")
    assert gold == "3"


def test_an_error_after_a_good_sentence_clears_its_result(browser_page, server):
    """The reason of a bad input stands alone: the previous sentence's tree and
    probabilities would read as the answer to the input that failed."""
    page = browser_page
    host, port = server.server_address[:2]
    page.goto(f"http://{host}:{port}/")
    _submit(page, GOOD)
    page.wait_for_selector("#tree svg g.node", timeout=30000)
    assert page.locator("#predicted").count() == 1
    _submit(page, "(3 (2 it) (9 good))")
    page.wait_for_function("document.getElementById('error').textContent.length > 0", timeout=30000)
    assert "column 12" in page.locator("#error").inner_text()
    assert page.locator("#tree svg").count() == 0 and page.locator("#tree").inner_html() == ""
    assert page.locator("#predicted").count() == 0 and page.locator("#prediction").inner_html() == ""
    _submit(page, "it is good .")                   # and the next good sentence shows as before
    page.wait_for_selector("#tree svg g.node", timeout=30000)
    assert page.locator("#error").inner_text() == ""
    assert page.locator("#tree svg g.node.leaf text").all_text_contents() == ["it", "is", "good", "."]
