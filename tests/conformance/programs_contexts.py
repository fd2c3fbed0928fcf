"""Grad modes, inference mode, autocast and profiler contexts used as blocks and as decorators of
the functions the frame calls; attribute deletion inside forward; user classes whose dunder
methods work on tensors (issue 17, frontend breadth)."""
import functools
import operator

import torch

from .harness import CaseTable, rg, rn

T = CaseTable("contexts")


# -- grad-mode decorators on called functions ---------------------------------------------------------------
@torch.no_grad()
def _ng_double(t):
    return t * 2


@torch.enable_grad()
def _eg_triple(t):
    return t * 3


@torch.no_grad
def _ng_bare(t):
    return t + 1


@torch.enable_grad
def _eg_bare(t):
    return t - 1


@torch.no_grad()
def _ng_calls_eg(t):
    return _eg_triple(t), t * 5


@torch.no_grad()
def _ng_reports(t):
    return t.sin(), torch.is_grad_enabled()


@T.case(rg(3, 4), grad=True)
def no_grad_decorated_helper(a):
    y = _ng_double(a)
    return a * y, y.requires_grad


@T.case(rg(3, 4), grad=True)
def enable_grad_decorated_under_no_grad(a):
    with torch.no_grad():
        y = _eg_triple(a)
        z = a + 1
    return y, z.requires_grad, y.requires_grad


@T.case(rg(3, 4), grad=True)
def no_grad_decorator_without_parentheses(a):
    y = _ng_bare(a)
    return a * 2 + y, y.requires_grad


@T.case(rg(3, 4), grad=True)
def enable_grad_decorator_without_parentheses(a):
    with torch.no_grad():
        y = _eg_bare(a)
    return y, y.requires_grad


@T.case(rg(3, 4), grad=True)
def no_grad_helper_calls_enable_grad_helper(a):
    y, z = _ng_calls_eg(a)
    return y, z, y.requires_grad, z.requires_grad


@T.case(rg(3, 4), grad=True)
def grad_mode_seen_inside_decorated_helper(a):
    y, inside = _ng_reports(a)
    return a.cos(), y, inside, torch.is_grad_enabled()


def _decorated_method_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @torch.no_grad()
        def stats(self, x):
            return self.lin(x).abs().mean()

        def forward(self, x):
            s = self.stats(x)
            return self.lin(x) * s, s.requires_grad
    return M()


T.build("no_grad_decorated_module_method", _decorated_method_module, rn(2, 4), grad=True)


# -- torch._C._set_grad_enabled and set_grad_enabled as a function -------------------------------------------
@T.case(rg(3, 4), grad=True)
def c_set_grad_enabled_pair(a):
    torch._C._set_grad_enabled(False)
    y = a * 2
    torch._C._set_grad_enabled(True)
    return a * 3 + y, y.requires_grad


@T.case(rg(3, 4), grad=True)
def c_set_grad_enabled_restores_previous(a):
    prev = torch.is_grad_enabled()
    torch._C._set_grad_enabled(False)
    y = a.exp()
    torch._C._set_grad_enabled(prev)
    return a * y, y.requires_grad, torch.is_grad_enabled()


def _c_set_grad_helper(t):
    torch._C._set_grad_enabled(False)
    r = t * 4
    torch._C._set_grad_enabled(True)
    return r


@T.case(rg(3, 4), grad=True)
def c_set_grad_enabled_in_helper(a):
    r = _c_set_grad_helper(a)
    return a + r, r.requires_grad


@T.case(rg(3, 4), grad=True)
def set_grad_enabled_as_function_then_back(a):
    torch.set_grad_enabled(False)
    y = a * 2
    torch.set_grad_enabled(True)
    return a * y, y.requires_grad


@T.case(rg(3, 4), grad=True)
def c_set_grad_enabled_inside_no_grad_block(a):
    with torch.no_grad():
        torch._C._set_grad_enabled(True)
        y = a * 2
        torch._C._set_grad_enabled(False)
        z = a * 3
    return y, z, y.requires_grad, z.requires_grad


# -- inference mode -----------------------------------------------------------------------------------------
@torch.inference_mode()
def _im_plus(t):
    return t + 1


@torch.inference_mode(False)
def _im_off_times(t):
    return t * 2


@T.case(rn(3, 4))
def inference_mode_decorated_helper(a):
    return _im_plus(a) * 2


@T.case(rg(3, 4))
def inference_mode_decorated_helper_grad_input(a):
    y = _im_plus(a)
    return y.clone(), y.requires_grad


@T.case(rg(3, 4), grad=True)
def inference_mode_false_decorated_helper(a):
    y = _im_off_times(a)
    return y, y.requires_grad


@T.case(rg(3, 4))
def inference_mode_block_grad_input(a):
    with torch.inference_mode():
        y = a * 2
        g = torch.is_grad_enabled()
    return y + 0, y.requires_grad, g, torch.is_grad_enabled()


@T.case(rg(3, 4), grad=True)
def inference_mode_false_inside_no_grad(a):
    with torch.no_grad():
        with torch.inference_mode(False):
            y = a * 2
        z = a * 3
    return y, y.requires_grad, z.requires_grad


@T.case(rg(3, 4))
def no_grad_inside_inference_mode(a):
    with torch.inference_mode():
        with torch.no_grad():
            y = a.sin()
        z = a.cos()
    return y + z, y.requires_grad, z.requires_grad


@T.case(rg(3, 4), grad=True)
def inference_mode_then_differentiable_rest(a):
    with torch.inference_mode():
        s = a.detach().abs().amax()
    return a * s.clone()


def _inference_method_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        @torch.inference_mode()
        def predict(self, x):
            return self.lin(x).argmax(-1)

        def forward(self, x):
            return self.predict(x) + 1
    return M()


T.build("inference_mode_decorated_module_method", _inference_method_module, rn(5, 4))


# -- context managers applied as decorators inside the frame ------------------------------------------------
def _times_two(t):
    return t * 2


@T.case(rg(3, 4), grad=True)
def no_grad_applied_in_frame(a):
    g = torch.no_grad()(_times_two)
    y = g(a)
    return a * y, y.requires_grad, torch.is_grad_enabled()


@T.case(rg(3, 4), grad=True)
def enable_grad_applied_in_frame_under_no_grad(a):
    with torch.no_grad():
        g = torch.enable_grad()(_times_two)
        y = g(a)
    return y, y.requires_grad


@T.case(rn(3, 4))
def inference_mode_applied_in_frame(a):
    g = torch.inference_mode()(_times_two)
    return g(a) + 0


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def autocast_applied_in_frame_to_lambda(a):
    g = torch.autocast("cpu", dtype=torch.bfloat16)(lambda t: t @ t)
    y = g(a)
    return y, y.dtype


# -- autocast -----------------------------------------------------------------------------------------------
@torch.autocast("cpu", dtype=torch.bfloat16)
def _ac_mm(t):
    return t @ t.t()


@torch.amp.autocast("cpu", dtype=torch.bfloat16)
def _amp_mm(t):
    return torch.mm(t, t.t())


@torch.autocast("cpu", dtype=torch.bfloat16)
def _ac_reports(t):
    return t @ t.t(), torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")


def _ac_block_helper(t):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return t @ t.t()


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def autocast_decorated_helper(a):
    y = _ac_mm(a)
    return y, y.dtype, y.float() + 1


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def amp_autocast_decorated_helper(a):
    y = _amp_mm(a)
    return y.float() * 2, y.dtype


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def autocast_state_inside_decorated_helper(a):
    y, on, dt = _ac_reports(a)
    return y, on, dt == torch.bfloat16, torch.is_autocast_enabled("cpu")


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def autocast_block_in_called_function(a):
    return _ac_block_helper(a) + 1


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def autocast_disabled_inside_enabled(a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ a
        with torch.autocast("cpu", enabled=False):
            z = a @ a
    return y, z, y.dtype, z.dtype


@T.case(rn(4, 4))
def is_autocast_enabled_outside(a):
    if torch.is_autocast_enabled():
        return a + 1
    return a - 1


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def is_autocast_enabled_cpu_inside(a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if torch.is_autocast_enabled("cpu"):
            y = (a @ a).float() + 1
        else:
            y = a
    return y, torch.is_autocast_enabled("cpu")


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def autocast_device_type_keyword(a):
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16, cache_enabled=False):
        y = torch.matmul(a, a)
    return y.dtype, y


@T.case(rg(4, 4), grad=True, atol=1e-2, rtol=1e-2)
def autocast_block_differentiable(a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ a.t()
    return y.float().relu()


def _autocast_forward_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @torch.autocast("cpu", dtype=torch.bfloat16)
        def forward(self, x):
            return self.lin(x)
    return M()


T.build("autocast_decorated_forward", _autocast_forward_module, rn(3, 4), atol=1e-2, rtol=1e-2)


@T.case(rn(4, 4), atol=1e-2, rtol=1e-2)
def cpu_amp_autocast_spelling(a):
    with torch.cpu.amp.autocast(dtype=torch.bfloat16):
        y = a @ a
        with torch.cpu.amp.autocast(enabled=False):
            z = a @ a
    return y, z, y.dtype, z.dtype


# -- profilers (ignored, as torch.compile ignores them) ------------------------------------------------------
@T.case(rn(3, 4))
def autograd_profiler_profile_block(a):
    with torch.autograd.profiler.profile():
        y = a + 1
    return y * 2


@T.case(rn(3, 4))
def torch_profiler_profile_block(a):
    with torch.profiler.profile():
        y = a.sin()
    return y


@T.case(rn(3, 4))
def torch_profiler_profile_with_arguments(a):
    with torch.profiler.profile(record_shapes=True, with_stack=False):
        y = a.cos()
    return y + 1


@T.case(rn(3, 4))
def profiler_record_function_block(a):
    with torch.profiler.record_function("my_range"):
        y = a * 3
    return y


@T.case(rn(3, 4))
def autograd_record_function_block(a):
    with torch.autograd.profiler.record_function("other_range"):
        y = a - 1
    return y.exp()


@T.case(rn(3, 4))
def profile_around_record_function(a):
    with torch.profiler.profile():
        with torch.profiler.record_function("inner"):
            y = a.abs()
        z = y + 1
    return z


def _record_function_helper(t):
    with torch.profiler.record_function("helper"):
        return t.tanh()


@T.case(rg(3, 4), grad=True)
def record_function_in_called_function(a):
    return _record_function_helper(a) * a


# -- saved-tensor hooks disabled around a block ---------------------------------------------------------------
@T.case(rg(3, 4), grad=True)
def disable_saved_tensors_hooks_block(a):
    with torch.autograd.graph.disable_saved_tensors_hooks("no saved-tensor hooks here"):
        y = a.sin() * a
    return y.exp()


def _no_hooks_helper(t):
    with torch.autograd.graph.disable_saved_tensors_hooks("helper"):
        return t.tanh()


@T.case(rg(3, 4), grad=True)
def disable_saved_tensors_hooks_in_called_function(a):
    return _no_hooks_helper(a) * a


# -- attributes deleted inside forward ----------------------------------------------------------------------
def _set_then_delete_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            self.tmp = x + 1
            y = self.lin(self.tmp)
            del self.tmp
            return y, hasattr(self, "tmp")
    return M()


def _setattr_delattr_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            setattr(self, "tmp", x * 2)
            y = self.lin(getattr(self, "tmp")) + 1
            delattr(self, "tmp")
            return y, hasattr(self, "tmp")
    return M()


def _delete_and_reset_in_helper_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.full((4,), 2.0)

        def _swap(self, x):
            s = self.scale
            del self.scale
            self.scale = s
            return x * s

        def forward(self, x):
            return self._swap(x) + 1, "scale" in self.__dict__
    return M()


def _delete_many_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            self.a = x * 2
            self.b = x * 3
            out = self.lin(self.a + self.b)
            del self.a
            del self.b
            return out, hasattr(self, "a"), hasattr(self, "b")
    return M()


T.build("module_attribute_set_then_deleted", _set_then_delete_module, rn(2, 4))
T.build("module_attribute_setattr_then_delattr", _setattr_delattr_module, rn(2, 4))
T.build("module_attribute_deleted_in_helper", _delete_and_reset_in_helper_module, rn(2, 4),
        state=lambda m: m.scale)
T.build("module_attributes_set_and_deleted", _delete_many_module, rn(2, 4))


# -- user classes whose dunder methods work on tensors -------------------------------------------------------
class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Vec(self.t + (other.t if isinstance(other, Vec) else other))

    def __radd__(self, other):
        return Vec(other + self.t)

    def __mul__(self, other):
        return Vec(self.t * other)

    def __rmul__(self, other):
        return Vec(other * self.t)

    def __neg__(self):
        return Vec(-self.t)

    def __sub__(self, other):
        return Vec(self.t - other)

    def __iadd__(self, other):
        self.t = self.t + other
        return self

    def __getitem__(self, i):
        return self.t[i]

    def __setitem__(self, i, v):
        self.t = self.t.clone()
        self.t[i] = v

    def __len__(self):
        return self.t.shape[0]

    def __iter__(self):
        return iter([self.t[0], self.t[1]])

    def __contains__(self, v):
        return v == 1

    def __bool__(self):
        return bool(self.t.shape[0])

    def __call__(self, y):
        return self.t * y

    def __eq__(self, other):
        return isinstance(other, Vec)

    def __lt__(self, other):
        return True


class Scope:
    """A context manager (kept apart from Vec: torch.compile treats any class with __enter__ and
    __exit__ as a context manager and cannot pass it to operators)."""

    def __init__(self, t):
        self.t = t

    def __enter__(self):
        return self.t * 2

    def __exit__(self, *exc):
        return False


@T.case(rn(2, 3))
def dunder_arithmetic(a):
    v = Vec(a)
    return (v + 1).t, (1 + v).t, (v * 2).t, (3 * v).t, (-v).t, (v - 1).t, (v + v).t


@T.case(rn(2, 3))
def dunder_inplace_add(a):
    v = Vec(a)
    v += 1
    v += 2.5
    return v.t


@T.case(rn(2, 3))
def dunder_getitem_setitem(a):
    v = Vec(a)
    v[0] = 5.0
    return v.t, v[1], v[0:1]


@T.case(rn(2, 3))
def dunder_len_iter_contains_bool(a):
    v = Vec(a)
    first, second = v
    return len(v), list(v), 1 in v, 2 in v, bool(v), first + second


@T.case(rn(2, 3))
def dunder_call_eq_lt(a):
    v = Vec(a)
    return v(3), v == Vec(a), v < Vec(a), v != Vec(a)


@T.case(rn(2, 3))
def dunder_enter_exit(a):
    with Scope(a) as t:
        y = t + 1
    return y


@T.case(rn(2, 3))
def dunder_through_operator_and_reduce(a):
    v = Vec(a)
    total = functools.reduce(operator.add, [v, v, v])
    return total.t, operator.getitem(v, 0), operator.mul(v, 2).t


@T.case(rn(2, 3))
def dunder_sum_with_start(a):
    v = Vec(a)
    return sum([v, v], Vec(torch.zeros_like(a))).t


@T.case(rn(2, 3))
def dunder_len_drives_loop(a):
    v = Vec(a)
    acc = a.new_zeros(a.shape[1])
    for i in range(len(v)):
        acc = acc + v[i]
    return acc


@T.case(rn(2, 3))
def dunder_reflected_with_python_number(a):
    v = Vec(a)
    return (2 + v).t, (2.5 * v).t
