"""Run the bytecode tests without pytest: ``python tests/bytecode/run_plain.py [-k WORD]``.

Used for CPython 3.12, where this repository's environment has neither torch nor pytest
(``run_py312.sh``). Imports every ``test_bytecode_*.py`` next to this file and calls each
``test_*`` function; exits non-zero when any fails.
"""
from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    word = argv[argv.index("-k") + 1] if "-k" in argv else ""
    sys.path.insert(0, str(HERE))
    failed, passed = [], 0
    for path in sorted(HERE.glob("test_bytecode_*.py")):
        module = importlib.import_module(path.stem)
        for name in sorted(n for n in dir(module) if n.startswith("test_")):
            if word not in f"{path.stem}::{name}":
                continue
            t0 = time.perf_counter()
            try:
                getattr(module, name)()
            except Exception:  # noqa: BLE001 - a failing test
                failed.append(f"{path.stem}::{name}")
                print(f"FAIL {path.stem}::{name}\n{traceback.format_exc()}")
            else:
                passed += 1
                print(f"ok   {path.stem}::{name} ({time.perf_counter() - t0:.2f}s)")
    print(f"\nPython {sys.version.split()[0]}: {passed} passed, {len(failed)} failed")
    for f in failed:
        print(f"  FAILED {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
