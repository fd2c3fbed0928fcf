"""Small helpers shared by the runtime tests."""
import xcompile._C as C


def check(root, *locals_, g=None, b=None, closure=None):
    """root.check() on a frame whose arguments are `locals_`."""
    return root.check(list(locals_), g if g is not None else {}, b if b is not None else {}, closure)


def leaf_root(value_adder, n_slots=0):
    """A root with one local (index 0) and one leaf added by value_adder(node)."""
    root = C.RootGuard(n_slots)
    value_adder(root.local(0, "v"))
    return root
