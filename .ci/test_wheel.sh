#!/usr/bin/env bash
# The package as a user installs it: build the sdist and the wheel, install the
# wheel into a fresh virtual environment outside the checkout, and run what a
# user runs. Nothing may depend on files that are only in the repository: the
# commands run from an empty folder, with no PYTHONPATH, and the check below
# fails if dynnets is imported from anywhere but the new environment.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH
start=$SECONDS

echo "+ python -m build --outdir $work/dist $repo"
python -m build --outdir "$work/dist" "$repo" > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
ls "$work/dist"
wheel=$(ls "$work"/dist/dynnets-*.whl)
ls "$work"/dist/dynnets-*.tar.gz >/dev/null

python -m venv "$work/venv"
py="$work/venv/bin/python"
echo "+ pip install $(basename "$wheel")"
"$py" -m pip install -q "$wheel"
mkdir "$work/user" && cd "$work/user"
export DYNNETS_CACHE_DIR="$work/cache"
dn="$work/venv/bin/dynnets"

"$py" - "$repo" "$work/venv" <<'PY'
"""Every public module imports, from the installed wheel."""
import importlib, os, pkgutil, sys
repo, venv = (os.path.realpath(p) for p in sys.argv[1:3])
import dynnets
where = os.path.realpath(dynnets.__file__)
assert where.startswith(venv) and not where.startswith(repo), f"dynnets imported from {where}"
names = [m.name for m in pkgutil.walk_packages(dynnets.__path__, "dynnets.")
         if not any(part.startswith("_") for part in m.name.split("."))]
optional = {"matplotlib", "dask", "distributed", "tensorboard", "torch", "jax"}   # extras: not in a plain install
skipped = []
for name in names:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] in optional:
            skipped.append(f"{name} (needs {exc.name.split('.')[0]})")
            continue
        raise
print(f"imported {len(names) - len(skipped)} public modules from {os.path.dirname(where)}"
      + (f"; without their extra: {', '.join(skipped)}" if skipped else ""))
from dynnets.data import load_samples
sizes = {k: len(v) for k, v in load_samples().items()}
assert sizes["train"] > 0 and sizes["dev"] > 0 and sizes["test"] > 0, sizes
print("shipped samples:", sizes)
PY

version=$("$dn" --version)
expected="dynnets $("$py" -c 'import dynnets; print(dynnets.__version__)')"
[ "$version" = "$expected" ] || { echo "dynnets --version printed '$version', expected '$expected'"; exit 1; }
case "$(basename "$wheel")" in
    "dynnets-${expected#dynnets }-"*) ;;
    *) echo "the wheel $(basename "$wheel") does not carry version ${expected#dynnets }"; exit 1 ;;
esac
echo "+ dynnets --version: $version"

echo "+ dynnets demo"
"$dn" demo --no-progress > demo.txt
grep -q "Tree-LSTM" demo.txt || { cat demo.txt; echo "dynnets demo printed no Tree-LSTM row"; exit 1; }
tail -8 demo.txt

echo "+ dynnets train --model treelstm --epochs 2 --out runs/tl"
"$dn" train --model treelstm --epochs 2 --out runs/tl --no-progress | tail -3
for f in best.npz log.jsonl config.json metrics.json; do [ -s "runs/tl/$f" ] || { echo "train wrote no runs/tl/$f"; exit 1; }; done

echo "+ dynnets predict --checkpoint runs/tl/best.npz --svg tree.svg ..."
"$dn" predict --checkpoint runs/tl/best.npz --svg tree.svg "The film is not good, but the acting is great."
head -c 200 tree.svg | grep -q "<svg" || { echo "predict --svg wrote no SVG"; exit 1; }
echo "wheel test passed in $((SECONDS - start)) s"
