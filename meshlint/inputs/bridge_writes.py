"""Which fields of one parameter a function may write, read from its code (for Megatron-Bridge's helpers).

pyregistry makes a whole argument unknown when a function it follows stops at a branch it cannot decide (a
``return`` under ``torch.cuda.is_available()``): what the rest of the function does to it is not known. Bridge's
helpers that do this (training/flex_dispatcher_backend.py's apply_flex_dispatcher_backend) write two or three named
fields of the model provider and read the rest; ``written_fields`` says which, so only those become unknown. It
answers None (any field) wherever the parameter escapes: handed to a call it cannot see into, aliased, returned,
reassigned, or used by a nested function.
"""

from __future__ import annotations

import ast

# builtins that read their arguments, never change them and hand none of them back
_READ_ONLY_CALLS = frozenset({"hasattr", "isinstance", "issubclass", "len", "int", "float", "bool", "str", "repr",
                              "id", "type", "callable", "print", "any", "all", "range", "divmod", "abs", "round"})
# builtins that hand an argument (or a part of it) back: the value goes where the call's result goes
_FLOWING_CALLS = frozenset({"getattr", "min", "max"})
# where a value is only read: compared, tested, computed with, formatted, a bare expression (``a or b`` and
# ``a if c else b`` hand an operand on: they are followed to where the value goes)
_READ_PARENTS = (ast.Compare, ast.UnaryOp, ast.BinOp, ast.If, ast.While, ast.Assert, ast.FormattedValue,
                 ast.JoinedStr, ast.Expr)
MAX_DEPTH = 4


def written_fields(fdef, param: str, resolve, depth: int = 0, skip: frozenset = frozenset()):
    """The set of ``param``'s attributes ``fdef`` may write (directly, into them, or through a helper it calls),
    or None where it may write any. ``resolve(name)`` gives the FunctionDef a bare called name refers to, or None;
    ``skip``: ids of Name nodes not to count (the assignment that binds a local alias)."""
    parents = {}
    nodes = []
    stack = list(fdef.body)
    for stmt in fdef.body:
        parents[id(stmt)] = None
    while stack:
        node = stack.pop()
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            stack.append(child)
    out: set = set()
    for node in nodes:
        if not (isinstance(node, ast.Name) and node.id == param) or id(node) in skip:
            continue
        if not isinstance(node.ctx, ast.Load) or _in_nested_scope(node, parents):
            return None
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            written = _chain_written(parent, parents, lambda assign: _only_read(fdef, assign, depth))
            if written is None:
                return None
            if written:
                out.add(parent.attr)
            continue
        if isinstance(parent, _READ_PARENTS) or isinstance(parent, ast.IfExp) and parent.test is node:
            continue   # ``param is None``, ``if param:``: looked at, not changed
        if isinstance(parent, ast.keyword):
            parent = parents.get(id(parent))
        if isinstance(parent, ast.Call) and parent.func is not node:
            func = parent.func
            name = func.id if isinstance(func, ast.Name) else None
            if name in _READ_ONLY_CALLS:
                continue
            if name in _FLOWING_CALLS:   # getattr(param, "a"): param.a, where the result goes
                if _chain_written(parent, parents, lambda assign: _only_read(fdef, assign, depth)) is False:
                    continue
                return None
            callee = resolve(name) if name is not None and depth < MAX_DEPTH else None
            target = _parameter_for(callee, parent, node) if callee is not None else None
            if target is None:
                return None
            sub = written_fields(callee, target, resolve, depth + 1)
            if sub is None:
                return None
            out |= sub
            continue
        return None   # aliased, returned, stored, called, put in a container: the object escapes
    return out


def _in_nested_scope(node, parents) -> bool:
    up = parents.get(id(node))
    while up is not None:
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return True
        up = parents.get(id(up))
    return False


def _only_read(fdef, assign, depth: int) -> bool:
    """The names ``assign`` binds (``n = param.a or 1``) are only read afterwards: not an alias written through."""
    targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
    if depth >= MAX_DEPTH or not all(isinstance(t, ast.Name) for t in targets):
        return False
    return all(written_fields(fdef, t.id, lambda name: None, depth + 1, frozenset({id(t)})) == set() for t in targets)


def _chain_written(start, parents, only_read):
    """Whether ``param.a...`` (``start``: its first attribute, or a getattr/min/max call handing it back) is
    written into: True for a store or delete through it, a method called on what it holds, it handed to a call
    (other than a read-only builtin), bound to a name or returned; None for a method of ``param`` itself
    (``param.m()``: any field); False where it is only read (also through a local name that is only read:
    ``only_read(assignment)``)."""
    node = start
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            return True
        parent = parents.get(id(node))
        if isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node or \
                isinstance(parent, ast.BoolOp) or isinstance(parent, ast.IfExp) and parent.test is not node:
            node = parent   # deeper into it, or ``param.a or x``: the value goes where the whole goes
            continue
        if isinstance(parent, ast.IfExp):   # the test of ``x if param.a else y``
            return False
        if isinstance(parent, ast.keyword):
            parent = parents.get(id(parent))
        if isinstance(parent, ast.Call):
            if parent.func is node:
                return None if node is start else True
            func = parent.func
            if isinstance(func, ast.Name) and func.id in _FLOWING_CALLS:
                node = parent
                continue
            return not (isinstance(func, ast.Name) and func.id in _READ_ONLY_CALLS)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node and only_read(parent):
            return False
        return not isinstance(parent, _READ_PARENTS) and not (isinstance(parent, ast.Subscript) and
                                                              parent.slice is node)


def _parameter_for(callee, call, arg) -> str | None:
    """The callee's parameter that ``arg`` of ``call`` binds, or None where that is not plain."""
    a = callee.args
    positional = [p.arg for p in list(a.posonlyargs) + list(a.args)]
    if arg in call.args:
        i = call.args.index(arg)
        if any(isinstance(x, ast.Starred) for x in call.args[: i + 1]) or i >= len(positional):
            return None
        return positional[i]
    kw = next(k for k in call.keywords if k.value is arg)
    names = positional + [p.arg for p in a.kwonlyargs]
    return kw.arg if kw.arg in names else None
