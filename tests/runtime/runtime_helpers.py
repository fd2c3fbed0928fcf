"""Small helpers shared by the runtime tests."""


def check(root, *locals_, g=None, b=None, closure=None):
    """root.check() on a frame whose arguments are `locals_`."""
    return root.check(list(locals_), g if g is not None else {}, b if b is not None else {}, closure)

