"""Every ```python block of README.md and of every page of the documentation
site (docs/**/*.md) runs as it stands.

Each page's blocks run in order in one fresh interpreter (a block may define a
primitive, which must not leak into this process's table), each block in its
own namespace, from a temporary working directory of the page (a later block
may read a file an earlier one wrote); a failure names the page, the block and
its line.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

RUNNER = r"""
import json, sys, traceback
# one BLAS thread, as dynnets.train's functions and the dynnets command run:
# the blocks that train by hand (not through dynnets.train) multiply small
# matrices, which one thread per core on a loaded two-core machine slows down
from dynnets.blas import blas_threads
page, blocks = json.load(sys.stdin)
for i, (line, code) in enumerate(blocks):
    try:
        with blas_threads(1):
            exec(compile(code, f"{page}:{line}", "exec"), {"__name__": f"doc_block_{i}"})
    except BaseException:
        print(f"{page} block {i + 1} (line {line}) failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
print(f"{len(blocks)} blocks ran")
"""


def python_blocks(text):
    """(line number, code) of each ```python fenced block."""
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        out.append((text.count("\n", 0, m.start()) + 2, m.group(1)))
    return out


def pages():
    """README.md and every Markdown page of the site that has a python block."""
    found = [README] + sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
    return [p for p in found if python_blocks(p.read_text())]


def run_blocks(page, tmp_path):
    blocks = python_blocks(page.read_text())
    name = str(page.relative_to(ROOT))
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + RUNNER],
                       input=json.dumps([name, blocks]), capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert f"{len(blocks)} blocks ran" in r.stdout


def test_readme_starts_with_the_two_setup_commands():
    lines = README.read_text().splitlines()
    assert lines[0] == "# dynnets"
    fence = lines.index("```bash")
    assert lines[fence + 1] == "pip install -e . && dynnets demo"
    assert lines[fence + 2] == "pip install -e '.[test]' && pytest -q"
    assert lines[fence + 3] == "```"


def test_readme_fits_on_a_few_screens():
    assert len(README.read_text().splitlines()) < 250


def test_readme_has_one_example_per_execution_mode():
    codes = [code for _, code in python_blocks(README.read_text())]
    assert any("dn.tensor" in c and "backward()" in c and "autobatch" not in c for c in codes)     # eager
    assert any("import dynnets.static as tf" in c and "Session" in c for c in codes)               # static
    assert any("dn.autobatch()" in c for c in codes)                                                # autobatch


def test_readme_links_resolve():
    text = README.read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_every_site_page_with_code_is_run():
    # the pages with code blocks: a guard against a runner that silently finds none
    names = {str(p.relative_to(ROOT)) for p in pages()}
    assert {"README.md", "docs/getting-started.md", "docs/tutorials/eager.md", "docs/tutorials/static.md",
            "docs/tutorials/autobatch.md", "docs/howto/add-primitive.md",
            "docs/tutorials/cnn-transformer.md"} <= names


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(page, tmp_path):
    run_blocks(page, tmp_path)
