"""The type stub (python/pinpool/_pinpool.pyi) says what the extension has: every public name of
the module, and every public method and property of each class, in both directions."""

import ast
import os

import pinpool
from pinpool import _pinpool

STUB = os.path.join(os.path.dirname(pinpool.__file__), "_pinpool.pyi")


def stub_names():
    tree = ast.parse(open(STUB).read())
    top, members, bases = set(), {}, {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
            bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]

    def inherited(name):
        return members[name].union(*(inherited(b) for b in bases[name] if b in members))

    return top, {name: inherited(name) for name in members}


def public(names):
    return {n for n in names if not n.startswith("_")}


def test_every_name_is_in_the_stub_and_nothing_else():
    top, members = stub_names()
    runtime = public(dir(_pinpool)) | {"__version__"}
    assert public(runtime) - top == set(), "in the module, not in the stub"
    assert public(top) - runtime - {"Size", "SocketLike"} == set(), "in the stub, not the module"
    for name, stubbed in members.items():
        cls = getattr(_pinpool, name)
        have = public(n for c in cls.__mro__ if c.__module__ in ("pinpool", "pinpool._pinpool")
                      for n in vars(c))
        assert have - stubbed == set(), f"{name}: not in the stub"
        assert public(stubbed) - have == set(), f"{name}: in the stub only"
