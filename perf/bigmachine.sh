#!/bin/bash
# Run perf/parallel.py (four ggml at once, one after another and all at once by hand, through
# rocbuild with --parallel auto and 1; one ggml at the same jobs) on a machine without
# network: this Python, which has jinja2, psutil and rich, with rocbuild's other dependencies
# from the wheels in perf/wheels/ (filled beforehand where PyPI is reachable:
# docs/development.md, "The big machine"), and ggml from perf/wheels/ggml-src.tar.gz.
#
#   bash perf/bigmachine.sh [--runs 1] [--before DIR] [--out DIR] [--skip-one | --skip-four]
#   FIXEDCOST=1 bash perf/bigmachine.sh ...   # perf/fixedcost.py after it
#
# --before DIR: a folder holding another rocbuild's `rocbuild` package (e.g. `git archive main
# rocbuild | tar -x -C DIR`): each rocbuild figure is taken with both, before and after.
# The wheels go into a venv (--system-site-packages) through pip --no-index; where this
# Python cannot make one (Ubuntu without python3-venv), they are unpacked onto PYTHONPATH
# (every one of them is pure Python or a plain extension, so that is an install too).
# Everything it makes is under ${TMPDIR:-/tmp}; the arguments go to perf.parallel.
# GGML_TAR=PATH takes ggml from another tarball of a ggml folder.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=perf/wheels
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/rocbuild-bigvenv-XXXXXX")
trap 'rm -rf "$work"' EXIT
# jinja2, psutil and rich too: a venv made from another venv's python (the device's
# /opt/torch/.venv) does not see that venv's packages through --system-site-packages
wants=("doit==0.37.*" gitpython zstandard jinja2 psutil rich)
ninja_ok() {  # the ninja on PATH is a jobserver client (>= 1.13)
    "$python" - <<'PY'
import re, shutil, subprocess, sys
ninja = shutil.which("ninja")
out = subprocess.run([ninja, "--version"], capture_output=True, text=True).stdout if ninja else ""
m = re.match(r"(\d+)\.(\d+)", out)
sys.exit(0 if m and (int(m[1]), int(m[2])) >= (1, 13) else 1)
PY
}
ninja_ok || wants+=("ninja>=1.13")
if "$python" -m venv --system-site-packages "$work/venv" 2>/dev/null \
        && "$work/venv/bin/python" -m pip --version >/dev/null 2>&1; then
    "$work/venv/bin/python" -m pip install -q --no-index --find-links "$wheels" "${wants[@]}"
    py="$work/venv/bin/python"
    export PATH="$work/venv/bin:$PATH"
    export PYTHONPATH="$PWD"
else
    echo "no venv with pip here: unpacking the wheels onto PYTHONPATH"
    mkdir -p "$work/site" "$work/bin"
    for whl in "$wheels"/*.whl; do
        "$python" -m zipfile -e "$whl" "$work/site"
    done
    for script in "$work"/site/*.data/scripts/*; do  # the ninja wheel's binary
        [ -e "$script" ] && install -m 755 "$script" "$work/bin/"
    done
    py="$python"
    export PATH="$work/bin:$PATH"
    export PYTHONPATH="$PWD:$work/site"
fi
"$py" -c "import doit, git, jinja2, psutil, rich, zstandard"
echo "python $("$py" -V 2>&1), cmake $(cmake --version | head -1 | awk '{print $3}'),"\
     "ninja $(ninja --version), $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB,"\
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" -m perf.parallel --source-tar "${GGML_TAR:-$wheels/ggml-src.tar.gz}" "$@"
if [ -n "${FIXEDCOST:-}" ]; then  # the fixed cost per component, and where its time goes
    "$py" -m perf.fixedcost --components 8 --runs 3 --profile "$work/fixedcost.prof"
fi
