"""Side effects on state that existed before the call: lists, dicts and objects passed in,
objects reached through them, globals and closure cells.  The compiled run must leave exactly
the state eager leaves (the harness compares the inputs after every call, objects by their
attributes, and each case's ``state`` for globals and closures)."""
import types

import torch

from .harness import CaseTable, obj, rn

T = CaseTable("effects")


# -- lists passed in -----------------------------------------------------------------------------------------
@T.case([rn(3), rn(3)])
def list_append_tensor(xs):
    xs.append(xs[0] + xs[1])
    return xs[0] * 2


@T.case([rn(3)])
def list_extend_and_insert(xs):
    xs.extend([xs[0] * 2, 5])
    xs.insert(0, xs[0] - 1)
    return xs[1] + 1


@T.case([rn(3), rn(3), rn(3)])
def list_pop_and_setitem(xs):
    last = xs.pop()
    xs[0] = last * 2
    return last + xs[1]


@T.case([rn(3), rn(3), rn(3), rn(3)])
def list_slice_assignment(xs):
    xs[1:3] = [xs[0] * 10]
    return xs[0] + 1


@T.case([rn(3), rn(3), rn(3)])
def list_del_item(xs):
    del xs[1]
    return xs[0] + xs[1]


@T.case([3, 1, 2], rn(3))
def list_sort_and_reverse_constants(xs, a):
    xs.sort()
    xs.reverse()
    return a * xs[0]


@T.case([rn(3), rn(3)])
def list_clear_then_refill(xs):
    s = xs[0] + xs[1]
    xs.clear()
    xs.append(s)
    return s * 2


@T.case([rn(3)], rn(3))
def list_inplace_add(xs, a):
    xs += [a * 2, a * 3]
    return a + 1


@T.case([rn(3), rn(3)])
def list_mutated_and_returned(xs):
    xs.append(xs[0] * 3)
    return xs


@T.case([[rn(3)], [rn(3)]])
def nested_list_inner_append(xss):
    xss[0].append(xss[1][0] * 2)
    xss[1].pop()
    return xss[0][0] + 1


@T.case([rn(3), rn(3)], [rn(3)])
def move_items_between_lists(src, dst):
    dst.append(src.pop(0))
    return dst[0] * 2


@T.case([rn(3), rn(3)])
def list_item_reordered_keeps_objects(xs):
    xs.insert(0, xs.pop())
    return xs[0] + 1


@T.case([rn(2), 1, "s"])
def list_of_mixed_values_mutated(xs):
    xs[1] = xs[1] + 10
    xs.append(xs[2] * 2)
    return xs[0] * xs[1]


# -- dicts passed in -----------------------------------------------------------------------------------------
@T.case({"a": rn(3)})
def dict_new_key(d):
    d["b"] = d["a"] * 2
    return d["a"] + 1


@T.case({"a": rn(3), "b": rn(3)})
def dict_update_and_pop(d):
    b = d.pop("b")
    d.update(c=b * 2, a=d["a"] + b)
    return b


@T.case({"a": rn(3), "b": rn(3), "c": rn(3)})
def dict_del_and_setdefault(d):
    del d["b"]
    d.setdefault("z", d["a"] * 3)
    d.setdefault("a", None)
    return d["c"] * 2


@T.case({"x": rn(3), "y": rn(3)})
def dict_clear_and_rebuild(d):
    total = d["x"] + d["y"]
    d.clear()
    d["total"] = total
    return total + 1


@T.case({"a": [rn(3)], "b": [rn(3)]})
def dict_of_lists_mutated(d):
    d["a"].append(d["b"][0] * 2)
    d["b"].clear()
    return d["a"][0] + 1


@T.case({"a": rn(3), "b": rn(3)})
def dict_popitem_and_reinsert(d):
    k, v = d.popitem()
    d[k + "2"] = v * 2
    return v + 1


@T.case({"a": rn(3)})
def dict_mutated_and_returned(d):
    d["b"] = d["a"] + 1
    return d


@T.case({"w": rn(3)}, rn(3))
def dict_overwrite_existing_key(d, a):
    d["w"] = d["w"] * a
    return a + 1


# -- objects passed in ---------------------------------------------------------------------------------------
class State:
    def __init__(self, x, n=0):
        self.x = x
        self.n = n
        self.history = []

    def step(self, y):
        self.x = self.x * 0.9 + y * 0.1
        self.n += 1
        self.history.append(self.n)
        return self.x


class Node:
    def __init__(self, value, child=None):
        self.value = value
        self.child = child


class Box:
    pass


@T.case(obj(State, rn(3)), rn(3))
def object_attribute_assignment(s, a):
    s.x = s.x + a
    return a * 2


@T.case(obj(State, rn(3)), rn(3))
def object_method_mutates_self(s, a):
    y = s.step(a)
    y = s.step(y)
    return y + 1


@T.case(obj(State, rn(3)), rn(3))
def object_new_attribute(s, a):
    s.extra = a * 3
    s.flag = True
    return s.x + a


@T.case(obj(State, rn(3)))
def object_delete_attribute(s):
    x = s.x
    del s.history
    return x * 2, hasattr(s, "history")


@T.case(obj(State, rn(3)))
def object_attribute_list_appended(s):
    s.history.append(s.x.sum())
    s.history.append("done")
    return s.x + 1


@T.case(obj(State, rn(3)), rn(3))
def object_setattr_builtin(s, a):
    for name in ("u", "v"):
        setattr(s, name, a * len(name))
    return a - 1


@T.case(obj(Node, rn(3), obj(Node, rn(3))))
def nested_object_attribute(n):
    n.child.value = n.child.value + n.value
    n.value = n.value * 0
    return n.child.value * 2


@T.case(obj(State, rn(3)), rn(3))
def store_new_object_into_input(s, a):
    s.child = Node(a * 2, Node(a * 3))
    return a + 1


@T.case(obj(State, rn(3)), rn(3))
def store_new_containers_into_input(s, a):
    s.pair = (a, a * 2)
    s.table = {"k": [a * 3, 4]}
    s.names = {"a", "b"}
    return a + 1


@T.case(obj(State, rn(3)), obj(State, rn(3)))
def swap_attributes_between_objects(s, t):
    s.x, t.x = t.x, s.x
    return s.x - t.x


@T.case(obj(State, rn(3)), [rn(3)])
def store_input_list_into_object(s, xs):
    s.ref = xs
    xs.append(s.x * 2)
    return s.x + 1


@T.case(obj(State, rn(3)), rn(3))
def same_new_list_stored_twice_is_one_object(s, a):
    shared = [a]
    s.first = shared
    s.second = shared
    shared.append(a * 2)
    return a * 3, s.first is s.second


@T.case(obj(State, rn(3)), rn(3))
def attribute_written_then_read_back(s, a):
    s.x = a * 5
    return s.x + 1


@T.case(obj(Box), rn(3))
def empty_object_gets_attributes(b, a):
    b.tensor = a * 2
    b.count = 3
    b.count += 1
    return b.tensor * b.count


# -- globals (each build gets its own copy of the module's globals) ------------------------------------------
def fresh(fn, **overrides):
    """``fn`` with a private copy of its module's globals (so eager and compiled copies don't share)."""
    g = dict(fn.__globals__)
    g.update(overrides)
    clone = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    g[fn.__name__] = clone
    return clone


LAST = None
SLOT = {"latest": None, "count": 0}
SEEN = [None]


def _store_global_tensor(a):
    global LAST
    LAST = a * 2
    return a + 1


T.build("global_rebound_to_tensor", lambda: fresh(_store_global_tensor, LAST=None), rn(3),
        state=lambda f: f.__globals__["LAST"])


def _global_dict_slot(a):
    SLOT["latest"] = a.sum()
    SLOT["count"] = 7
    return a * 2


T.build("global_dict_item_assignment", lambda: fresh(_global_dict_slot, SLOT={"latest": None, "count": 0}),
        rn(3), state=lambda f: dict(f.__globals__["SLOT"]))


def _global_list_slot(a):
    SEEN[0] = a * 3
    return a - 1


T.build("global_list_item_assignment", lambda: fresh(_global_list_slot, SEEN=[None]), rn(3),
        state=lambda f: list(f.__globals__["SEEN"]))


def _global_new_name(a):
    global NEW_NAME
    NEW_NAME = {"t": a + 1, "n": 3}
    return NEW_NAME["t"] * 2


T.build("global_defined_by_the_function", lambda: fresh(_global_new_name), rn(3),
        state=lambda f: f.__globals__.get("NEW_NAME"))


def _global_written_then_read(a):
    global LAST
    LAST = a * 4
    return LAST + 1


T.build("global_written_then_read", lambda: fresh(_global_written_then_read, LAST=None), rn(3),
        state=lambda f: f.__globals__["LAST"])


# -- closure cells -------------------------------------------------------------------------------------------
def _make_nonlocal_tensor():
    latest = None

    def fn(x):
        nonlocal latest
        latest = x * 2
        return x + 1
    return fn


T.build("nonlocal_rebound_without_reading", _make_nonlocal_tensor, rn(3),
        state=lambda f: f.__closure__[0].cell_contents)


def _make_nonlocal_in_helper():
    acc = torch.zeros(3)

    def add(x):
        nonlocal acc
        acc = acc + x

    def fn(x):
        add(x)
        add(x * 2)
        return x * 3
    return fn


T.build("nonlocal_rebound_in_inlined_helper", _make_nonlocal_in_helper, rn(3),
        state=lambda f: f.__closure__[0].cell_contents.__closure__[0].cell_contents)


def _make_closure_list():
    slots = [None, None]

    def fn(x):
        slots[0] = x * 2
        slots[1] = slots[0] + 1
        return x - 1
    return fn


T.build("closure_list_items_assigned", _make_closure_list, rn(3),
        state=lambda f: list(f.__closure__[0].cell_contents))


def _make_closure_object():
    st = State(torch.zeros(3))

    def fn(x):
        st.x = x * 2
        return x + 1
    return fn


T.build("closure_object_attribute_assigned", _make_closure_object, rn(3),
        state=lambda f: f.__closure__[0].cell_contents.x)


@T.case(rn(3))
def local_closure_counter_made_in_frame(a):
    count = 0

    def bump():
        nonlocal count
        count += 1
    bump()
    bump()
    return a * count


# -- ordering and aliasing -----------------------------------------------------------------------------------
@T.case([rn(3)], {"k": rn(3)})
def list_and_dict_both_mutated(xs, d):
    xs.append(d["k"])
    d["k"] = xs[0]
    d["list"] = xs
    return xs[0] + d["k"]


@T.case(obj(State, rn(3)), rn(3))
def exception_after_mutation_still_applies(s, a):
    try:
        s.x = a * 2
        raise ValueError
    except ValueError:
        s.n = 5
    return a + 1


@T.case([rn(3)], rn(3))
def mutation_inside_loop(xs, a):
    for i in range(3):
        xs.append(a * i)
    return a * 2


@T.case(obj(State, rn(3)), [rn(3), rn(3)])
def mutation_through_inlined_helpers(s, xs):
    def push(lst, v):
        lst.append(v)

    def record(st, v):
        st.x = v
    push(xs, xs[0] * 2)
    record(s, xs[-1])
    return xs[1] + 1
