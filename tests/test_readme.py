"""Every ```python block of README.md runs.

The blocks run in one fresh interpreter (a block may define a primitive,
which must not leak into this process's table), each in its own namespace,
from a temporary working directory; a failure names the block and its line.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

RUNNER = r"""
import json, sys, traceback
# one BLAS thread, as dynnets.train's functions and the dynnets command run:
# the blocks that train by hand (not through dynnets.train) multiply small
# matrices, which one thread per core on a loaded two-core machine slows down
from dynnets.blas import blas_threads
blocks = json.load(sys.stdin)
for i, (line, code) in enumerate(blocks):
    try:
        with blas_threads(1):
            exec(compile(code, f"README.md:{line}", "exec"), {"__name__": f"readme_block_{i}"})
    except BaseException:
        print(f"README block {i + 1} (line {line}) failed:", file=sys.stderr)
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


def test_readme_starts_with_the_two_setup_commands():
    lines = README.read_text().splitlines()
    assert lines[0] == "# dynnets"
    fence = lines.index("```bash")
    assert lines[fence + 1] == "pip install -e . && dynnets demo"
    assert lines[fence + 2] == "pip install -e '.[test]' && pytest -q"
    assert lines[fence + 3] == "```"


def test_readme_python_blocks_run(tmp_path):
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 4
    env_path = str(ROOT)
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {env_path!r})\n" + RUNNER],
                       input=json.dumps(blocks), capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-4000:]
    assert f"{len(blocks)} blocks ran" in r.stdout
