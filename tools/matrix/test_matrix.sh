#!/usr/bin/env bash
# xcompile against other Pythons and torches (issue #30): for each PY:TORCH pair, a virtualenv
# kept under a cache folder outside the tree (made once: a torch wheel is gigabytes), the wheel
# of that Python (built once per run, against the torch of the first pair of that Python)
# installed there, and the layer subset run from outside the tree through the installed wheel.
# One line per pair; exit status 0 = all passed.
#
#   tools/matrix/test_matrix.sh "3.12:2.14.1 3.11:2.14.1 3.12:2.11.0"     (make test-matrix PAIRS=...)
#
# XCOMPILE_MATRIX_CACHE: the cache folder (default ~/.cache/xcompile-matrix); MATRIX_SUBSET: the
# test paths run (default: the layer subset below); MATRIX_PYTEST_ARGS: more pytest arguments.
# Each pair's log: $CACHE/logs/py<PY>-torch<TORCH>.log
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PAIRS="${1:-${PAIRS:-3.12:2.14.1}}"
CACHE="${XCOMPILE_MATRIX_CACHE:-$HOME/.cache/xcompile-matrix}"
# Every layer: the frame hook, cache and guard tree (runtime), bytecode, the frontend, breaks and
# resume, AOT, kernels (C++ and Triton's interpreter), dynamic shapes, export, guards end to end,
# the conformance programs, the public API and the torch-version shim; real models are in
# tests/models (add it with MATRIX_SUBSET when transformers is installed in the venv).
DEFAULT_SUBSET="tests/unit tests/runtime tests/bytecode tests/frontend tests/breaks tests/aot
  tests/kernels tests/conformance tests/reference tests/e2e/test_dynamic_shapes.py
  tests/e2e/test_export.py tests/e2e/test_guards.py tests/e2e/test_model_zoo.py
  tests/e2e/test_global_state_guards.py tests/e2e/test_lifetime.py tests/programs/test_programs.py"
SUBSET="${MATRIX_SUBSET:-$DEFAULT_SUBSET}"
mkdir -p "$CACHE/logs" "$CACHE/wheels"

status=0
for pair in $PAIRS; do
  py="${pair%%:*}"; torch_v="${pair##*:}"
  name="py$py-torch$torch_v"; venv="$CACHE/venvs/$name"; log="$CACHE/logs/$name.log"
  : > "$log"
  start=$(date +%s)
  # the venv, made once and kept (tools/matrix/venv.sh)
  vpy="$("$ROOT/tools/matrix/venv.sh" "$pair" "$log" 2>>"$log")"
  case $? in
    0) ;;
    2) echo "[matrix] $name: SKIPPED (no Python $py here)"; status=1; continue ;;
    *) echo "[matrix] $name: FAILED to make its virtualenv: $(tail -1 "$log") (see $log)"; status=1; continue ;;
  esac
  # the wheel: one per Python, built against the torch of that Python's first pair and installed
  # with every torch of the others, as users get it (the one _C runs on every torch of the range;
  # MATRIX_WHEEL_PER_PAIR=1: a wheel of its own for each pair instead)
  key="py$py"; [[ -n "${MATRIX_WHEEL_PER_PAIR:-}" ]] && key="$name"
  whl_dir="$CACHE/wheels/$key"
  if [[ " ${built:-} " != *" $key "* ]]; then
    rm -rf "$whl_dir"
    if ! "$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
          -C build-dir="$CACHE/build/$name" -w "$whl_dir" "$ROOT" >>"$log" 2>&1; then
      echo "[matrix] $name: FAILED to build (see $log)"; status=1; continue
    fi
    built="${built:-} $key"; echo "[matrix] $name: built the wheel for Python $py against torch $torch_v" >>"$log"
  else
    echo "[matrix] $name: the wheel built for Python $py earlier in this run" >>"$log"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall \
    "$whl_dir"/xcompile-*.whl >>"$log" 2>&1 ||
    { echo "[matrix] $name: FAILED to install the wheel (see $log)"; status=1; continue; }
  # the subset, from outside the tree: `import xcompile` is the installed wheel's
  paths=(); for p in $SUBSET; do paths+=("$ROOT/$p"); done
  # (pyproject's addopts give -q; the last line is pytest's count of passed/failed)
  # (the tree's root on the path for the tests' own `tests.` imports; xcompile is under python/,
  # so the import is still the wheel's, checked first)
  where="$(cd "$CACHE" && PYTHONPATH="$ROOT" "$venv/bin/python" -c "import xcompile; print(xcompile.__file__)")"
  [[ "$where" == "$venv"/* ]] || { echo "[matrix] $name: FAILED: imported xcompile from $where"; status=1; continue; }
  summary="$(cd "$CACHE" && PYTHONPATH="$ROOT" "$venv/bin/python" -m pytest "${paths[@]}" -p no:cacheprovider \
              ${MATRIX_PYTEST_ARGS:-} 2>&1 | tee -a "$log" | tail -1)"
  took=$(( $(date +%s) - start ))
  # ("3 xfailed" is no failure: counts of failed tests and errors only)
  if grep -qE "[0-9]+ passed" <<<"$summary" && ! grep -qE "[0-9]+ (failed|errors?)\b" <<<"$summary"; then
    echo "[matrix] $name: passed ($summary; ${took}s)"
  else
    echo "[matrix] $name: FAILED ($summary; ${took}s; see $log)"; status=1
  fi
done
exit $status
