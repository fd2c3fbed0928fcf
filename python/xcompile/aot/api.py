"""AOT autograd for xcompile: one entry point, a short list of named passes.

    aot_compile(gm, example_inputs, fw_compiler, bw_compiler=None, *, partition="min_cut")
        -> CompiledProgram, called as fn(*inputs) -> tuple

Pipeline (each step one module):
  lift       torch-level graph -> program(*user_inputs, *params_and_buffers)   lift.py
  analyze    mutations, output aliasing, requires_grad (fake run)              schema.py
  training   trace_joint -> partition (min_cut | save_all) -> fw/bw graphs     joint.py, partition.py
  inference  trace_forward (no grad anywhere in the call)                      joint.py
  runtime    autograd.Function + mutation write-back + view regeneration       runtime.py
             (+ the call-time check for written inputs that share memory)      aliasing.py

What the compilers receive (``(aten_gm, example_inputs) -> callable``):
- ``fw_compiler`` gets the forward graph: functional ATen, placeholders = flat primals
  (user inputs in order, then the parameters/buffers the graph reads), output = a flat
  tuple ``(*fw_outs, *saved)`` in training or ``(*fw_outs)`` in inference, where fw_outs are
  the user outputs that are not aliases, then bases of aliased output groups, then the new
  values of mutated inputs. ``example_inputs`` are fake tensors with the real metadata.
  The inference graph goes to ``inference_compiler`` (default: ``fw_compiler``).
- ``bw_compiler`` gets ``(*saved, *tangents) -> (*grads)``, at the first backward, with the
  real saved tensors and (contiguous) incoming gradients as ``example_inputs``.
- Graphs may hold ATen random ops (``nondeterministic_seeded``): with
  ``config.fallback_random`` set, ``gm.meta["fallback_random"]`` is True and a compiler
  must run them as the same ATen calls to stay bit-identical with eager.
- The callables they return are called as ``f(*args)`` and must return a tuple or list.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
import torch.fx

from .. import _C, config
from ..debug import dump, timing
from ..debug.minifier import repro_compilers
from ..log import enabled, log
from .aliasing import independent_examples
from .joint import Decompositions, fake_inputs, makes_fresh_sizes, trace_forward, trace_joint
from .lift import LiftedProgram, lift
from .partition import POLICIES
from .runtime import CompiledProgram, EagerTraining, TrainingArtifact
from .schema import analyze
from .verify import check_functional, check_partition

Compiler = Callable[[torch.fx.GraphModule, list], Callable]

SAVED_MODIFIED = "modified by an inplace operation"


def run_as_is(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The default compiler: run the FX graph as it is (this is "aot_eager")."""
    return gm.forward


def fallback_random() -> bool:
    return bool(config.fallback_random)


def _keep_eager_rng(decompositions: Decompositions | None) -> Decompositions | None:
    """Under fallback_random, never decompose random ops: keep the ATen calls eager makes."""
    if not decompositions or not fallback_random():
        return decompositions
    random = {torch.ops.aten.dropout.default, torch.ops.aten.native_dropout.default}
    return {op: fn for op, fn in decompositions.items()
            if op not in random and torch.Tag.nondeterministic_seeded not in op.tags}


def aot_compile(gm: torch.fx.GraphModule, example_inputs: list, fw_compiler: Compiler | None = None,
                bw_compiler: Compiler | None = None, *, partition: str = "min_cut",
                decompositions: Decompositions | None = None,
                inference_compiler: Compiler | None = None, program: LiftedProgram | None = None,
                state: list | None = None) -> CompiledProgram:
    """Compile a torch-level FX graph with AOT forward/backward graphs (see module doc).

    Dynamic shapes: ``example_inputs`` may be the frontend's fake inputs with symbolic sizes,
    with ``program`` the lifted graph and ``state`` fakes of its parameters and buffers
    (static sizes); the graphs are then traced once for every size."""
    if partition not in POLICIES:
        raise ValueError(f"unknown partition {partition!r}; choose one of {sorted(POLICIES)}")
    fw_compiler = fw_compiler or run_as_is
    bw_compiler = bw_compiler or run_as_is
    inference_compiler = inference_compiler or fw_compiler
    if config.repro_after is not None:        # the minifier (debug/minifier.py) checks these compiles
        fw_compiler, bw_compiler, inference_compiler = repro_compilers(fw_compiler, bw_compiler, inference_compiler)
    dumping = dump.current()          # the debug dump's frame folder (None: off), also for later compiles
    if dumping is not None:
        fw_compiler, bw_compiler, inference_compiler = dumping.aot_compilers(fw_compiler, bw_compiler,
                                                                             inference_compiler)
    decompositions = _keep_eager_rng(decompositions)
    partition_fn = POLICIES[partition]

    program = program or lift(gm)                                          # 1. lift
    # examples that share memory are traced as independent inputs; calls where a written
    # input shares memory with another run eagerly (aliasing.py)
    primals = list(example_inputs) + list(state) if state is not None else \
        independent_examples(example_inputs, program.state) + program.state
    fake_mode, fakes = fake_inputs(primals, shape_env=makes_fresh_sizes(gm))
    schema = analyze(program, fakes, fake_mode)                            # 2. analyze

    def mark(g: torch.fx.GraphModule) -> torch.fx.GraphModule:
        g.meta["fallback_random"] = fallback_random()
        _untraced_hops(g)
        return g

    def make_training(flags: tuple) -> TrainingArtifact:                   # 3. training
        nonlocal schema
        fk = _with_requires_grad(fake_mode, fakes, flags)
        sch = schema if list(flags) == schema.input_requires_grad else analyze(program, fk, fake_mode)
        t0 = time.perf_counter()
        try:
            joint = trace_joint(program, sch, fake_mode, fk, decompositions)
        except RuntimeError as e:
            if SAVED_MODIFIED not in str(e):
                raise
            # the backward of an output needs a value the program overwrote afterwards
            # (``v.mul_(v)``, then v is returned or written back): eager raises only if a
            # backward reaches it, so such calls run the torch-level graph eagerly
            raise EagerTraining(str(e).split(". Hint")[0]) from e
        t1 = time.perf_counter()
        part = partition_fn(joint, sch.mutated_inputs)
        t2 = time.perf_counter()
        if config.verify:
            check_partition(part, joint.num_primals, joint.num_tangents)
        if enabled("aot_graphs"):
            log("aot_graphs", "%s\n%s\nforward graph:%s\nbackward graph:%s", sch.summary(),
                part.describe(), part.fw_gm.code, part.bw_gm.code)
        if dumping is not None:
            dumping.aot_training(sch, part)
        log("compile_times", "aot: joint trace %.1f ms, partition (%s) %.1f ms",
            (t1 - t0) * 1e3, part.policy, (t2 - t1) * 1e3)
        timing.record("aot.joint_trace", t1 - t0)
        timing.record("aot.partition", t2 - t1)
        fw = fw_compiler(mark(part.fw_gm), list(fk))
        art = TrainingArtifact(sch, fw, mark(part.bw_gm), bw_compiler, joint.grad_slots, len(part.saved))
        art.partition = part
        art.joint = joint
        return art

    def make_inference() -> Callable:                                      # 4. inference
        fw_gm = trace_forward(program, schema, fake_mode, fakes, decompositions)
        if config.verify:
            check_functional(fw_gm, "inference graph")
        if enabled("aot_graphs"):
            log("aot_graphs", "%s\ninference graph:%s", schema.summary(), fw_gm.code)
        if dumping is not None:
            dumping.aot_inference(schema, fw_gm)
        return inference_compiler(mark(fw_gm), list(fakes))

    compiled = CompiledProgram(schema, program.state, make_training, make_inference, gm.forward)
    flags = tuple(bool(getattr(p, "requires_grad", False)) for p in primals)
    if torch.is_grad_enabled() and any(flags):
        compiled.training(flags)
    else:
        compiled.inference()
    return compiled


_UNTRACED: dict = {}


def _untraced_hops(gm: torch.fx.GraphModule) -> None:
    """Higher-order ops (``cond``, ``while_loop``) in a graph run untraced: run eagerly, they
    compile their subgraphs with torch.compile, and no frame below them is xcompile's."""
    changed = False
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator):
            op = n.target
            if op not in _UNTRACED:
                run = _C.untraced(op)

                def call(*args, _run=run, **kwargs):
                    return _run(*args, **kwargs)
                call.__name__ = call.__qualname__ = f"hop_{op.__name__}"
                _UNTRACED[op] = call
            n.target = _UNTRACED[op]
            changed = True
    if changed:
        gm.recompile()


def _with_requires_grad(fake_mode, fakes: list, flags: tuple) -> list:
    """Fake primals with the given requires_grad flags (fresh fakes where they differ)."""
    out = []
    for t, rg in zip(fakes, flags):
        if isinstance(t, torch.Tensor) and t.requires_grad != rg:
            with fake_mode:
                t = t.detach().clone().requires_grad_(rg) if rg else t.detach()
        out.append(t)
    return out
