"""The wide random-program search: ``make fuzz N=5000`` (or ``python tests/programs/fuzz.py``).

    python tests/programs/fuzz.py -n 5000 [--start 0] [--backends eager,aot_eager,inductor] [--progress 250]
                                  [--minimize] [--timeout 180] [--log FILE]

Each backend's programs run in a worker process (programs in-process, ``xcompile.reset()``
between them); a worker that dies or hangs on a program records it as a ``crash`` and a new
worker goes on with the next seed.  Prints one line per failure as it is found and a summary
per backend: programs, ok, wrong answers, errors (xcompile raised where eager did not),
crashes, and programs discarded because eager raised; a count line every ``--progress``
programs, and on Ctrl-C or SIGTERM the summary of the programs run so far.  ``--minimize`` shrinks every failure
and prints the small program.  Known failures (tests/programs/known.py) are counted and marked
``known``.  Replay one seed:

    python tests/programs/fuzz.py --show SEED --backends inductor
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _imports():
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tests.programs import harness, known, proggen
    return proggen, harness, known


def worker(backend: str, start: int, end: int, minimize: bool) -> None:
    proggen, harness, _ = _imports()
    import logging
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    for seed in range(start, end):
        print(json.dumps({"start": seed}), flush=True)
        t = time.time()
        try:
            prog = proggen.make_program(seed)
            r = harness.check(prog, backend)
        except MemoryError as ex:   # the process is spent: report it, and a new worker goes on
            print(json.dumps({"seed": seed, "status": "crash", "msg": f"harness raised MemoryError: {ex}",
                              "secs": round(time.time() - t, 2)}), flush=True)
            os._exit(3)
        except Exception as ex:  # noqa: BLE001   (the harness itself: report, go on)
            r = harness.Result("crash", f"harness raised {type(ex).__name__}: {ex}")
            prog = None
        rec = {"seed": seed, "status": r.status, "msg": r.msg, "secs": round(time.time() - t, 2)}
        if r and prog is not None:
            rec["program"] = repr(prog)
        if r and minimize and prog is not None and r.status != "crash":
            small = harness.minimize(prog, backend, r)
            rec["small"] = repr(small)
        print(json.dumps(rec), flush=True)
        if os.environ.get("XCOMPILE_FUZZ_DIE_AFTER") == str(seed):   # tests: a worker dying between programs
            os._exit(9)


def _spawn(backend, start, end, minimize):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", backend, str(start), str(end)]
    if minimize:
        cmd.append("--minimize")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    q: queue.Queue = queue.Queue()

    def pump():
        for line in p.stdout:
            q.put(line)
        q.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return p, q


def run_backend(backend, start, n, *, minimize, timeout, log, progress=0):
    _, _, known = _imports()
    counts = collections.Counter()
    failures = []
    seed = start
    end = start + n
    t0 = time.time()
    try:
        _run_range(backend, seed, end, minimize, timeout, log, known, counts, failures, progress)
    except KeyboardInterrupt:                   # Ctrl-C or SIGTERM: the summary of what ran
        counts["interrupted"] += 1
        print(f"[{backend}] interrupted after {_done(counts)} programs", flush=True)
    secs = time.time() - t0
    return counts, failures, secs


def _done(counts) -> int:
    return sum(counts[k] for k in ("ok", "wrong", "error", "crash", "discard"))


def _run_range(backend, seed, end, minimize, timeout, log, known, counts, failures, progress):
    idle_deaths = 0          # workers in a row that died without starting a program
    t0 = time.time()
    while seed < end:
        p, q = _spawn(backend, seed, end, minimize)
        current = None
        started = False
        while True:
            try:
                line = q.get(timeout=timeout if not minimize else timeout * 20)
            except queue.Empty:
                line = "TIMEOUT"
            except KeyboardInterrupt:
                p.kill()
                raise
            if line is None or line == "TIMEOUT":
                if p.poll() is None:
                    p.kill()
                p.wait()
                if line is None and p.returncode == 0 and seed >= end:
                    break                    # finished its range
                if current is None:          # died between programs (after one, or before the first)
                    why = "hung (timeout)" if line == "TIMEOUT" else f"exit {p.returncode}"
                    print(f"[{backend}] worker died between programs ({why}) before seed {seed}: restarted",
                          flush=True)
                    idle_deaths = 0 if started else idle_deaths + 1
                    if idle_deaths >= 3:     # it cannot start at all: say so, do not loop forever
                        print(f"[{backend}] workers die before their first program: seeds {seed}..{end - 1} "
                              "not run", flush=True)
                        counts["not_run"] += end - seed
                        seed = end
                    break
                idle_deaths = 0
                why = "hung (timeout)" if line == "TIMEOUT" else f"worker died (exit {p.returncode})"
                rec = {"seed": current, "status": "crash", "msg": why}
                _record(backend, rec, counts, failures, known, log)
                seed = current + 1
                break
            rec = json.loads(line)
            started = True
            if "start" in rec:
                current = rec["start"]
                continue
            _record(backend, rec, counts, failures, known, log)
            current = None
            seed = rec["seed"] + 1
            if progress and _done(counts) % progress == 0:
                print(f"[{backend}] {_done(counts)} programs: ok {counts['ok']} wrong {counts['wrong']} "
                      f"errors {counts['error']} crashes {counts['crash']} discarded {counts['discard']} "
                      f"({time.time() - t0:.0f}s)", flush=True)
        if seed >= end:
            break
        counts["restart"] += 1               # the worker ended with seeds left: a new one goes on


def _record(backend, rec, counts, failures, known, log):
    st = rec["status"]
    counts[st] += 1
    if st in ("wrong", "error", "crash"):
        k = known.KNOWN.get((backend, rec["seed"]))
        if k:
            counts["known"] += 1
        failures.append(rec)
        line = f"[{backend}] seed {rec['seed']}: {st.upper()}{' (known: ' + k + ')' if k else ''}: {rec['msg']}"
        print(line, flush=True)
        if rec.get("small"):
            print(rec["small"], flush=True)
        if log:
            with open(log, "a") as fh:
                fh.write(json.dumps(dict(rec, backend=backend)) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=int(os.environ.get("N", 1000) or 1000))
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--backends", default="eager,aot_eager,inductor")
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds one program may take")
    ap.add_argument("--log", default=None, help="append every failure as a JSON line here")
    ap.add_argument("--show", type=int, default=None, help="print one seed's program and check it")
    ap.add_argument("--dynamic", action="store_true",
                    help="compile with dynamic=True (symbolic sizes from the first call)")
    ap.add_argument("--cudagraphs", action="store_true",
                    help="inductor with mode='reduce-overhead', CPU graphs recorded by the stand-in "
                         "device; each program's calls made three times (warm-up, record, replay)")
    ap.add_argument("--progress", type=int, default=250, help="a count line every N programs (0: none)")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.dynamic:
        os.environ["XCOMPILE_FUZZ_DYNAMIC"] = "1"        # read by harness.py; workers inherit it
    if a.cudagraphs:
        os.environ["XCOMPILE_FUZZ_CUDAGRAPHS"] = "1"     # read by harness.py
        os.environ["XCOMPILE_CUDAGRAPH_STAND_IN"] = "1"  # read by xcompile.config at import
    if a.worker:
        worker(a.worker[0], int(a.worker[1]), int(a.worker[2]), a.minimize)
        return 0
    if a.show is not None:
        proggen, harness, _ = _imports()
        prog = proggen.make_program(a.show)
        print(repr(prog))
        for b in a.backends.split(","):
            r = harness.check(prog, b)
            print(f"{b}: {r.status} {r.msg}")
            if r and a.minimize:
                print(repr(harness.minimize(prog, b, r)))
        return 0
    summary = []
    bad = 0
    signal.signal(signal.SIGTERM, signal.default_int_handler)     # kill: the summary of what ran
    for b in a.backends.split(","):
        counts, failures, secs = run_backend(b, a.start, a.n, minimize=a.minimize, timeout=a.timeout, log=a.log,
                                             progress=a.progress)
        new = sum(1 for f in failures if f["seed"] not in {s for (bb, s) in _imports()[2].KNOWN if bb == b})
        bad += new
        cut = " (interrupted)" if counts["interrupted"] else ""
        summary.append(f"{b:10s} programs {_done(counts):5d}{cut}  ok {counts['ok']:5d}  wrong {counts['wrong']:4d}  "
                       f"errors {counts['error']:4d}  crashes {counts['crash']:3d}  restarts {counts['restart']:3d}  "
                       f"{'not run ' + str(counts['not_run']) + '  ' if counts['not_run'] else ''}"
                       f"discarded {counts['discard']:4d}  "
                       f"(known {counts['known']}, new {new})  {secs:7.0f}s")
        if counts["interrupted"]:
            break
    print("\nrandom programs, seeds %d..%d:" % (a.start, a.start + a.n - 1))
    print("\n".join(summary))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
