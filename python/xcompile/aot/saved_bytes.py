"""Count the bytes autograd keeps for the backward (``saved_tensors_hooks``).

    with SavedBytes() as saved:
        loss = model(x).sum()
    saved.bytes    # distinct storages packed for backward, in bytes
    saved.count    # number of tensors packed

Storages are counted once however many saved tensors view them, so a weight saved
both as ``w`` and ``w.t()`` costs its size once, as it does in memory.
"""
from __future__ import annotations

import torch


def _storage_key(t: torch.Tensor) -> tuple:
    s = t.untyped_storage()
    return (t.device, s.data_ptr(), s.nbytes())


class SavedBytes:
    def __init__(self) -> None:
        self.count = 0
        self._storages: dict[tuple, int] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    @property
    def bytes(self) -> int:
        return sum(self._storages.values())

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        self.count += 1
        key = _storage_key(t)
        self._storages[key] = key[2]
        return t

    @staticmethod
    def _unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    def __enter__(self) -> "SavedBytes":
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
