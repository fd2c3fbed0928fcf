"""User dict subclasses (HF ModelOutput) and sets from outside the frame (findings FH1, FH7): one
graph each; dict-subclass results come back as real instances (type, keys in order, values and
attributes compared with eager); set writes are replayed on the real set."""
import dataclasses
import types
from collections import OrderedDict
from dataclasses import fields
from typing import Optional, Tuple

import torch
from torch import nn

from .harness import CaseTable, rn

T = CaseTable("dict_subclasses")


class ModelOutput(OrderedDict):
    """transformers.utils.ModelOutput, the parts the programs use (same code)."""

    def __post_init__(self):
        class_fields = fields(self)
        first_field = getattr(self, class_fields[0].name)
        other_fields_are_none = all(getattr(self, field.name) is None for field in class_fields[1:])
        if other_fields_are_none and not isinstance(first_field, torch.Tensor):
            raise ValueError("the programs pass tensors")
        for field in class_fields:
            v = getattr(self, field.name)
            if v is not None:
                self[field.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            inner_dict = dict(self.items())
            return inner_dict[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class LMOutput(ModelOutput):
    loss: Optional[torch.Tensor] = None
    logits: torch.Tensor = None
    hidden_states: Optional[Tuple[torch.Tensor, ...]] = None


def _state(o):
    return {k: getattr(o, k) for k in ("loss", "logits", "hidden_states")}


class _LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 5)

    def forward(self, x, labels):
        logits = self.proj(x)
        loss = nn.functional.cross_entropy(logits, labels)
        out = LMOutput(loss=loss, logits=logits, hidden_states=(x,))
        return out, out.to_tuple()[0] + out[1].sum(), _state(out)


T.build("model_output_returned", _LM, rn(3, 4), torch.tensor([0, 4, 2]), grad=True)


@T.case(rn(6))
def model_output_index_and_key(x):
    o = LMOutput(logits=x * 2, hidden_states=(x + 1,))
    o["loss"] = o.logits.sum()
    o.logits = o.logits - 1
    return o[0] * o["hidden_states"][0] + len(o), list(o.keys()), "loss" in o, o, _state(o)


class Bag(OrderedDict):
    def total(self):
        return sum(v.sum() for v in self.values())


@T.case(rn(2, 3))
def ordered_dict_subclass_edits(x):
    b = Bag(a=x, b=x.exp())
    b["c"] = b["a"] * b["b"]
    b.move_to_end("a")
    del b["b"]
    return b, b.total(), dict(b), {**b}, b == {"c": 1}, isinstance(b, dict)


SEEN: set = set()


def _note(a):
    SEEN.add("tanh")
    SEEN.discard("old")
    return a.tanh()


def _fresh_note():
    g = dict(_note.__globals__)
    g["SEEN"] = {"old", "kept"}
    return types.FunctionType(_note.__code__, g, _note.__name__)


T.build("outside_set_add_discard", _fresh_note, rn(4), state=lambda f: sorted(f.__globals__["SEEN"]))


class _Tagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.tags = set()

    def forward(self, x):
        self.tags.update(["seen", "lin"])
        return self.lin(x).relu()


T.build("module_set_attribute_update", _Tagged, rn(2, 3), state=lambda m: sorted(m.tags))
