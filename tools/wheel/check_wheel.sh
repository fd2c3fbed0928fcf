#!/usr/bin/env bash
# The wheel tested as installed: a fresh virtualenv that sees the installed torch (a .pth line
# naming this interpreter's site-packages, so torch and its dependencies import, while the
# editable install of xcompile there is not used), the repaired wheel installed with pip (its
# Requires-Dist on torch must be satisfied by that torch: nothing downloaded), then, from outside
# the source tree: import, one function compiled on each backend (a C++ kernel built on
# inductor), __version__ and the recorded torch checked; then a clean uninstall; and the sdist's
# PKG-INFO: the supported torch range, marked Dynamic.
# Usage: tools/wheel/check_wheel.sh [dist-dir]        (exit status 0 = all good)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIST="$(cd "${1:-$ROOT/dist}" && pwd)"     # absolute: the checks below run from a temporary folder
PYTHON="${PYTHON:-python3}"
WHEEL="$(ls "$DIST"/xcompile-*-manylinux*.whl | head -1)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "[wheel] $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB) in a fresh virtualenv"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
SITE="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
VSITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$SITE" > "$VSITE/_xcompile_wheel_test_torch.pth"
"$VPY" -m pip install -q --disable-pip-version-check "$WHEEL"

cd "$WORK"
XCOMPILE_CACHE_DIR="$WORK/kernels" "$VPY" - "$VSITE" <<'PY'
import os
import importlib.metadata as md
import sys

import torch
import xcompile
from xcompile import _build_info

site = sys.argv[1]
assert xcompile.__file__.startswith(site), f"imported {xcompile.__file__}, not the installed wheel"
assert xcompile.__version__ == md.version("xcompile"), (xcompile.__version__, md.version("xcompile"))
assert _build_info.TORCH_VERSION == torch.__version__, (_build_info.TORCH_VERSION, torch.__version__)
requires = md.requires("xcompile")
assert requires == ["torch<2.15,>=2.11"], requires   # one wheel for the range (issue #30)

def f(x, y):
    return (x.sin() * y + 1).relu().sum(-1)

x, y = torch.randn(8, 16), torch.randn(16)
for backend in ("eager", "aot_eager", "inductor"):
    xcompile.reset()
    torch.testing.assert_close(xcompile.compile(f, backend=backend)(x, y), f(x, y))
built = [p for p in os.listdir(os.environ["XCOMPILE_CACHE_DIR"]) if not p.startswith(".")]
assert built, "inductor built no C++ kernel"
print(f"[wheel] xcompile {xcompile.__version__} for torch {_build_info.TORCH_VERSION}, "
      f"Requires-Dist {requires[0]}, Requires-Python {md.metadata('xcompile')['Requires-Python']}: "
      "eager, aot_eager and inductor agree with eager")
PY
"$VPY" -m pip uninstall -y -q xcompile
# the sdist, built against no torch, states the supported range, marked Dynamic (its wheels narrow it)
SDIST="$(ls "$DIST"/xcompile-*.tar.gz | head -1)"
pkg_info="$(tar xzf "$SDIST" -O --wildcards '*/PKG-INFO')"
range="$(cd "$ROOT/python/xcompile" && "$PYTHON" -c 'import _torch_check; print(_torch_check.supported_range())')"
lo="${range#torch>=}"; lo="${lo%%,*}"; hi="${range##*<}"
grep -qx "Requires-Dist: torch<$hi,>=$lo" <<<"$pkg_info" && grep -qx "Dynamic: Requires-Dist" <<<"$pkg_info" ||
  { echo "[wheel] $(basename "$SDIST"): want Requires-Dist $range marked Dynamic; PKG-INFO has:"; grep -E "^(Requires|Dynamic)" <<<"$pkg_info"; exit 1; }
echo "[wheel] $(basename "$SDIST"): Requires-Dist $range, Dynamic: Requires-Dist"
rm "$VSITE/_xcompile_wheel_test_torch.pth"
left="$(ls "$VSITE" | grep -i xcompile || true)"
[[ -z "$left" ]] || { echo "[wheel] left after uninstall: $left"; exit 1; }
echo "[wheel] uninstalled cleanly"
