#!/bin/bash
# Run perf/parallel.py and perf/fixedcost.py (issue 34's figures) on a machine without network: a venv of this
# Python that sees the system's jinja2, psutil and rich, with rocbuild's other dependencies
# installed from the wheels in perf/wheels/ (filled beforehand where PyPI is reachable:
# docs/development.md, "The big machine"), and ggml from perf/wheels/ggml-src.tar.gz.
#
#   bash perf/bigmachine.sh [--runs 1] [--parallel auto] [--skip-one]
#
# Everything it makes is under ${TMPDIR:-/tmp}; the arguments go to perf.parallel.
# GGML_TAR=PATH takes ggml from another tarball of a ggml folder.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=perf/wheels
python=${PYTHON:-python3}
venv=$(mktemp -d "${TMPDIR:-/tmp}/rocbuild-bigvenv-XXXXXX")
trap 'rm -rf "$venv"' EXIT
"$python" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" \
    "doit==0.37.*" gitpython zstandard
# the ninja wheel only where the system's ninja cannot be a jobserver client (< 1.13)
if ! "$venv/bin/python" - <<'PY'
import re, shutil, subprocess, sys
ninja = shutil.which("ninja")
out = subprocess.run([ninja, "--version"], capture_output=True, text=True).stdout if ninja else ""
m = re.match(r"(\d+)\.(\d+)", out)
sys.exit(0 if m and (int(m[1]), int(m[2])) >= (1, 13) else 1)
PY
then
    "$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" "ninja>=1.13"
fi
"$venv/bin/python" -c "import doit, git, jinja2, psutil, rich, zstandard" 
echo "python $("$venv/bin/python" -V 2>&1), cmake $(cmake --version | head -1 | awk '{print $3}'),"\
     "ninja $(ninja --version), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
PATH="$venv/bin:$PATH" PYTHONPATH="$PWD" "$venv/bin/python" -m perf.parallel \
    --source-tar "${GGML_TAR:-$wheels/ggml-src.tar.gz}" "$@"
# the fixed cost per component, and where a cold build's own time goes (cProfile)
PATH="$venv/bin:$PATH" PYTHONPATH="$PWD" "$venv/bin/python" -m perf.fixedcost \
    --components 8 --runs 3 --profile "$venv/fixedcost.prof"
