"""Runs a function on N ranks (processes) of a gloo process group, with a hard time limit.

``run_ranks(fn, tmp_path, *args)`` spawns the processes with ``torch.multiprocessing.spawn``
(a ``FileStore`` under ``tmp_path`` for the rendezvous), calls ``fn(rank, world_size, *args, **kwargs)`` in
each, and returns each rank's return value (saved with ``torch.save``). A rank that raises makes
it raise ``torch.multiprocessing.ProcessRaisedException`` with that rank's traceback (the other
ranks are terminated: a peer blocked in a collective does not hang the run); past ``timeout``
seconds every rank is killed and it raises ``TimeoutError``. ``fn`` must be importable by name
(a module-level function) since the children are fresh interpreters.
"""
from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank: int, fn, store_path: str, world: int, out_dir: str, args: tuple, kwargs: dict) -> None:
    torch.set_num_threads(1)                 # N ranks share the machine's cores
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        result = fn(rank, world, *args, **kwargs)
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def run_ranks(fn, tmp_path, *args, world: int = 2, timeout: float = 120.0, **kwargs) -> list:
    out_dir = str(tmp_path)
    store = os.path.join(out_dir, "filestore")
    ctx = mp.spawn(_entry, args=(fn, store, world, out_dir, args, kwargs), nprocs=world, join=False)
    deadline = time.monotonic() + timeout
    try:
        # grace_period: a rank blocked in a collective ignores SIGTERM; SIGKILL follows 2 s later
        while not ctx.join(timeout=max(0.1, min(1.0, deadline - time.monotonic())), grace_period=2.0):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{getattr(fn, '__name__', fn)} on {world} ranks ran past {timeout:.0f} s")
    finally:
        for p in ctx.processes:               # on a timeout (or any error here): no rank outlives the test
            if p.is_alive():
                p.kill()
        for p in ctx.processes:
            p.join(5)
    return [torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=False) for r in range(world)]
