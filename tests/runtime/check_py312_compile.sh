#!/usr/bin/env bash
# Builds the torch-free part of xcompile._C against CPython 3.12 and runs the runtime smoke
# test under python3.12 (no torch there: guard_tensor.cpp, guard_shapes.cpp, tensor_alias.cpp,
# torch_compat.cpp and kernel_launch.cpp, the TUs that call torch, are replaced by
# py312_torch_stub.cpp; csrc/graphs/ is
# another module).
#   1. g++ -fsyntax-only on every torch-free TU against the 3.12 headers
#   2. link them into a test module _C in a temporary directory
#   3. python3.12 runtime_smoke.py <that directory>
# Usage: tests/runtime/check_py312_compile.sh [python3.12]     (exit status 0 = all good)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY312="${1:-${XC_PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}}"
PY311="${XC_PY311:-python}"
INC312="$("$PY312" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
EXT312="$("$PY312" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
PYBIND="$("$PY311" -c 'import pybind11; print(pybind11.get_include())')"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

SOURCES=()
for f in "$ROOT"/csrc/*.cpp; do
  case "$(basename "$f")" in guard_tensor.cpp|guard_shapes.cpp|tensor_alias.cpp|torch_compat.cpp|kernel_launch.cpp) continue ;; esac   # torch calls
  SOURCES+=("$f")
done
FLAGS=(-std=c++17 -fPIC -fvisibility=hidden -Wall -Werror -Wno-unused-function -Wno-missing-field-initializers
       -I"$ROOT/csrc" -I"$INC312" -I"$PYBIND")

echo "[py312] syntax check: ${#SOURCES[@]} translation units against $INC312"
for f in "${SOURCES[@]}"; do g++ "${FLAGS[@]}" -fsyntax-only "$f"; done

echo "[py312] building test module _C$EXT312"
OBJS=()
PIDS=()
for f in "${SOURCES[@]}" "$HERE/py312_torch_stub.cpp"; do
  o="$OUT/$(basename "$f" .cpp).o"
  g++ "${FLAGS[@]}" -O1 -c "$f" -o "$o" &
  PIDS+=($!)
  OBJS+=("$o")
done
for p in "${PIDS[@]}"; do wait "$p"; done
g++ -shared "${OBJS[@]}" -o "$OUT/_C$EXT312"

echo "[py312] running runtime_smoke.py under $("$PY312" --version)"
"$PY312" "$HERE/runtime_smoke.py" "$OUT"
