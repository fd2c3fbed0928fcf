#!/usr/bin/env bash
# The kept virtualenv of a PY:TORCH pair (issue #30): $CACHE/venvs/py<PY>-torch<TORCH>, made once
# (a torch wheel is gigabytes with its CUDA libraries) from that Python (pyenv's, then PATH's)
# with torch==TORCH, then the build and test tools; pip is asked again only when the venv's
# torch is not the wanted one or a tool is missing. Prints the venv's python.
#
#   tools/matrix/venv.sh 3.12:2.14.1 [log]        (used by test_matrix.sh and `make wheel PYTHONS=`)
#
# XCOMPILE_MATRIX_CACHE: the cache folder (default ~/.cache/xcompile-matrix).
set -uo pipefail
pair="$1"; log="${2:-/dev/null}"
py="${pair%%:*}"; torch_v="${pair##*:}"
CACHE="${XCOMPILE_MATRIX_CACHE:-$HOME/.cache/xcompile-matrix}"
venv="$CACHE/venvs/py$py-torch$torch_v"
PIP_Q=(-q --disable-pip-version-check)

find_python() {   # an interpreter of that minor version: pyenv's, then PATH's
  local v="$1" p
  for p in "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"$v".*/bin/python "$(command -v "python$v")"; do
    [[ -x "$p" ]] && { echo "$p"; return 0; }
  done
  return 1
}

if ! "$venv/bin/python" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$torch_v')" 2>/dev/null; then
  base="$(find_python "$py")" || { echo "no Python $py here" >&2; exit 2; }
  rm -rf "$venv"
  mkdir -p "$CACHE/venvs"
  { "$base" -m venv "$venv" && "$venv/bin/python" -m pip install "${PIP_Q[@]}" "torch==$torch_v"; } >>"$log" 2>&1 ||
    { echo "cannot install torch $torch_v for Python $py (see $log)" >&2; exit 1; }
fi
# (triton: the Triton kernel tests run its interpreter on the CPU; torch's CPU wheels, unlike its
# default ones, do not bring it, and `make deps` installs it for the pinned pair too)
"$venv/bin/python" -c "import pybind11, ninja, pytest, networkx, numpy, expecttest, triton, scikit_build_core as s, sys
sys.exit(int(s.__version__.split('.')[0]) < 1)" 2>/dev/null ||
  "$venv/bin/python" -m pip install "${PIP_Q[@]}" pybind11 'scikit-build-core>=1.0' ninja pytest networkx numpy \
    expecttest triton >>"$log" 2>&1 ||
  { echo "cannot install the build and test tools for Python $py (see $log)" >&2; exit 1; }
echo "$venv/bin/python"
