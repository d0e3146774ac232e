"""Message templates: text with ``{expression}`` holes, parsed on first use."""

from __future__ import annotations

from meshlint.engine.expr.errors import EvalError, ExprError, NeedFact
from meshlint.engine.expr.expression import Expr, compiled_expr, parse
from meshlint.engine.expr.functions import render
from meshlint.engine.expr.values import MAX_STR, Env, _charge_mem
from meshlint.limits import MAX_TEMPLATE_CHARS

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a first run ~17 M instructions
    from typing import Any


class Template:
    """Text with ``{expression}`` holes; ``{{`` and ``}}`` are literal braces.

    The holes are parsed on first use and not pickled: a rule's message is
    needed only when it fails, so the rule cache stores the text alone. A
    built-in rule's template comes split already (``split``: its literal texts, and
    each hole's source as a 1-tuple, in order, as the prebuilt rules store it):
    its text is joined back only if something reads it.
    """

    __slots__ = ("_source", "_parts", "_split")

    def __init__(self, source: str | None, parts: tuple | None = None, split: tuple | None = None):
        self._source = source
        self._parts = parts
        self._split = split

    @property
    def source(self) -> str:
        if self._source is None:
            self._source = join_split(self._split)
        return self._source

    def __reduce__(self):
        return (Template, (self.source,))

    def __eq__(self, other) -> bool:
        return isinstance(other, Template) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)

    def __repr__(self) -> str:
        return f"Template({self.source!r})"

    @property
    def parts(self) -> tuple:  # str | Expr
        if self._parts is None:
            split = self._split
            if split is None:
                self._parts = _template_parts(self._source)
            else:
                self._parts = tuple(p if p.__class__ is str else compiled_expr(p[0]) or parse(p[0]) for p in split)
        return self._parts

    def split(self) -> tuple:
        """Its literal texts and holes' sources (a hole as a 1-tuple), as ``Template(None, split=...)`` takes them."""
        return tuple(p if isinstance(p, str) else (p.source,) for p in self.parts)

    def render(self, env: Env) -> str:
        out, room = [], MAX_STR
        for part in self.parts:
            if isinstance(part, str):
                text = part
            else:
                try:
                    text = render(part.evaluate(env))
                    _charge_mem(env, len(text))
                except NeedFact:
                    text = "unknown"
                except EvalError as exc:
                    text = f"<error: {exc}>"
            room -= len(text)
            if room < 0:  # a message is at most MAX_STR characters, however many holes it has
                out.append(text[: len(text) + room] + "…")
                break
            out.append(text)
        return "".join(out)

    def free_names(self) -> set[str]:
        names: set[str] = set()
        for part in self.parts:
            if isinstance(part, Expr):
                names |= part.free_names()
        return names


def parse_template(src: str) -> Template:
    """Parse (and so validate) a template now; raises ExprError with a column."""
    if not isinstance(src, str):
        raise ExprError("a template must be a string")
    if len(src) > MAX_TEMPLATE_CHARS:
        raise ExprError(f"template longer than {MAX_TEMPLATE_CHARS:,} characters")
    return Template(src, _template_parts(src))


def join_split(split: tuple) -> str:
    """The template text of a split (``Template.split``): literal braces doubled again, each hole in braces."""
    return "".join(p.replace("{", "{{").replace("}", "}}") if p.__class__ is str else "{" + p[0] + "}"
                   for p in split)


def _template_parts(src: str) -> tuple:
    parts: list[Any] = []
    buf: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "{" and src[i + 1 : i + 2] == "{":
            buf.append("{")
            i += 2
        elif c == "}" and src[i + 1 : i + 2] == "}":
            buf.append("}")
            i += 2
        elif c == "{":
            end = _closing_brace(src, i)
            inner = src[i + 1 : end]
            try:
                expr = compiled_expr(inner) or parse(inner)
            except ExprError as exc:
                col = (exc.col or 1) + i + 1
                raise ExprError(f"in {{{inner}}}: {exc.message}", col) from None
            if buf:
                parts.append("".join(buf))
                buf = []
            parts.append(expr)
            i = end + 1
        elif c == "}":
            raise ExprError("single '}' in template (write '}}' for a literal brace)", i + 1)
        else:
            buf.append(c)
            i += 1
    if buf:
        parts.append("".join(buf))
    return tuple(parts)



def _closing_brace(src: str, start: int) -> int:
    depth, i, quote = 0, start, None
    while i < len(src):
        c = src[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                if c != "}":
                    raise ExprError("unbalanced brackets in template hole", i + 1)
                return i
        i += 1
    raise ExprError("unterminated '{' in template", start + 1)
