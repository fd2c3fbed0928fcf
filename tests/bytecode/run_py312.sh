#!/usr/bin/env bash
# Run the bytecode tests under CPython 3.12 (no torch, no pytest there): plain-script runner.
# Usage: tests/bytecode/run_py312.sh [-k WORD]     PY312=/path/to/python3.12 to override.
set -euo pipefail
if [ -z "${PY312:-}" ]; then
  for cand in /root/.pyenv/versions/3.12.1/bin/python3.12 python3.12; do
    if "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then PY312="$cand"; break; fi
  done
fi
: "${PY312:?no working python3.12 found; set PY312}"
cd "$(dirname "$0")/../.."
exec "$PY312" tests/bytecode/run_plain.py "$@"
