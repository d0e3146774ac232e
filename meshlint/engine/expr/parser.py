"""The recursive-descent parser: tokens -> a syntax tree of the node types in ``nodes``."""

from __future__ import annotations

from meshlint.engine.expr.errors import ExprError
from meshlint.engine.expr.functions import FUNCTIONS
from meshlint.engine.expr.nodes import (MAX_DEPTH, Attr, BinOp, BoolOp, Call, Compare, Cond, Const, Index, ListComp,
                                        ListLit, Name, Node, Unary)
from meshlint.engine.expr.tokens import KEYWORDS, Token, tokenize


# --------------------------------------------------------------------------- parser

class _Parser:
    def __init__(self, src: str):
        self.toks = tokenize(src)
        self.pos = 0
        self.depth = 0

    def peek(self) -> Token:
        return self.toks[self.pos]

    def next(self) -> Token:
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def at(self, kind: str, value=None) -> bool:
        tok = self.toks[self.pos]
        return tok.kind == kind and (value is None or tok.value == value)

    def at_op(self, *ops: str) -> bool:
        tok = self.toks[self.pos]
        return tok.kind == "OP" and tok.value in ops

    def at_kw(self, kw: str) -> bool:
        tok = self.toks[self.pos]
        return tok.kind == "NAME" and tok.value == kw

    def expect_op(self, op: str) -> Token:
        tok = self.next()
        if tok.kind != "OP" or tok.value != op:
            raise ExprError(f"expected {op!r}, found {_describe(tok)}", tok.col)
        return tok

    def expect_kw(self, kw: str) -> Token:
        tok = self.next()
        if tok.kind != "NAME" or tok.value != kw:
            raise ExprError(f"expected {kw!r}, found {_describe(tok)}", tok.col)
        return tok

    def deeper(self, col: int):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels", col)

    def parse(self) -> Node:
        node = self.expr()
        tok = self.peek()
        if tok.kind != "EOF":
            raise ExprError(f"unexpected {_describe(tok)}", tok.col)
        return node

    def expr(self) -> Node:
        self.deeper(self.peek().col)
        node = self.or_()
        if self.at_kw("if"):
            col = self.next().col
            test = self.or_()
            self.expect_kw("else")
            other = self.expr()
            node = Cond(test, node, other, col)
        self.depth -= 1
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.at_kw("or"):
            col = self.next().col
            node = BoolOp("or", node, self.and_(), col)
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.at_kw("and"):
            col = self.next().col
            node = BoolOp("and", node, self.not_(), col)
        return node

    def not_(self) -> Node:
        if self.at_kw("not"):
            col = self.next().col
            self.deeper(col)
            node = Unary("not", self.not_(), col)
            self.depth -= 1
            return node
        return self.compare()

    def compare(self) -> Node:
        first = self.sum()
        rest = []
        col = self.peek().col
        while True:
            if self.at_op("==", "!=", "<", "<=", ">", ">="):
                op = self.next().value
            elif self.at_kw("in"):
                self.next()
                op = "in"
            elif self.at_kw("not") and self.toks[self.pos + 1].kind == "NAME" and self.toks[self.pos + 1].value == "in":
                self.pos += 2
                op = "not in"
            else:
                break
            rest.append((op, self.sum()))
        return Compare(first, rest, col) if rest else first

    def sum(self) -> Node:
        node = self.term()
        while self.at_op("+", "-"):
            tok = self.next()
            node = BinOp(tok.value, node, self.term(), tok.col)
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.at_op("*", "/", "//", "%"):
            tok = self.next()
            node = BinOp(tok.value, node, self.unary(), tok.col)
        return node

    def unary(self) -> Node:
        if self.at_op("-", "+"):
            tok = self.next()
            self.deeper(tok.col)
            node = Unary(tok.value, self.unary(), tok.col)
            self.depth -= 1
            return node
        return self.power()

    def power(self) -> Node:
        node = self.postfix()
        if self.at_op("**"):
            tok = self.next()
            self.deeper(tok.col)
            node = BinOp("**", node, self.unary(), tok.col)
            self.depth -= 1
        return node

    def postfix(self) -> Node:
        node = self.atom()
        while True:
            if self.at_op("."):
                col = self.next().col
                tok = self.next()
                if tok.kind != "NAME":
                    raise ExprError(f"expected a field name after '.', found {_describe(tok)}", tok.col)
                node = Attr(node, tok.value, col)
            elif self.at_op("["):
                col = self.next().col
                index = self.expr()
                self.expect_op("]")
                node = Index(node, index, col)
            else:
                return node

    def atom(self) -> Node:
        tok = self.next()
        if tok.kind in ("INT", "FLOAT", "STR"):
            return Const(tok.value, tok.col)
        if tok.kind == "NAME":
            if tok.value == "true":
                return Const(True, tok.col)
            if tok.value == "false":
                return Const(False, tok.col)
            if tok.value == "null":
                return Const(None, tok.col)
            if tok.value in KEYWORDS:
                raise ExprError(f"unexpected keyword {tok.value!r}", tok.col)
            if self.at_op("("):
                return self.call(tok)
            return Name(tok.value, tok.col)
        if tok.kind == "OP" and tok.value == "(":
            node = self.expr()
            self.expect_op(")")
            return node
        if tok.kind == "OP" and tok.value == "[":
            return self.list_(tok.col)
        raise ExprError(f"unexpected {_describe(tok)}", tok.col)

    def call(self, name_tok: Token) -> Node:
        if name_tok.value not in FUNCTIONS:
            raise ExprError(f"unknown function {name_tok.value!r}", name_tok.col)
        self.expect_op("(")
        args = []
        if not self.at_op(")"):
            args.append(self.expr())
            while self.at_op(","):
                self.next()
                args.append(self.expr())
        self.expect_op(")")
        spec = FUNCTIONS[name_tok.value]
        if not spec.min_args <= len(args) <= spec.max_args:
            want = str(spec.min_args) if spec.min_args == spec.max_args else f"{spec.min_args} to {spec.max_args}"
            raise ExprError(f"{name_tok.value}() takes {want} arguments, got {len(args)}", name_tok.col)
        return Call(name_tok.value, args, name_tok.col)

    def list_(self, col: int) -> Node:
        if self.at_op("]"):
            self.next()
            return ListLit([], col)
        first = self.expr()
        if self.at_kw("for"):
            loops, conds = [], []
            while self.at_kw("for"):
                self.next()
                var = self.next()
                if var.kind != "NAME" or var.value in KEYWORDS:
                    raise ExprError(f"expected a loop variable, found {_describe(var)}", var.col)
                self.expect_kw("in")
                loops.append((var.value, self.or_()))
            while self.at_kw("if"):
                self.next()
                conds.append(self.or_())
            self.expect_op("]")
            return ListComp(first, loops, conds, col)
        items = [first]
        while self.at_op(","):
            self.next()
            if self.at_op("]"):
                break
            items.append(self.expr())
        self.expect_op("]")
        return ListLit(items, col)


def _describe(tok: Token) -> str:
    if tok.kind == "EOF":
        return "end of expression"
    if tok.kind == "STR":
        return "string"
    return repr(tok.value)
