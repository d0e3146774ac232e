"""Tokenizing an expression's source: numbers, strings, names and operators, each with its column."""

from __future__ import annotations

from meshlint.record import Record
from meshlint.engine.expr.errors import ExprError
from meshlint.limits import MAX_EXPR_CHARS

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a first run ~17 M instructions
    from typing import Any

MAX_SOURCE = MAX_EXPR_CHARS
KEYWORDS = {"and", "or", "not", "in", "if", "else", "for", "true", "false", "null"}


# --------------------------------------------------------------------------- tokens

_TWO_CHAR = {"==", "!=", "<=", ">=", "//", "**"}
_ONE_CHAR = set("+-*/%<>()[],.")


class Token(Record):
    kind: str  # INT FLOAT STR NAME OP EOF
    value: Any
    col: int


def tokenize(src: str) -> list[Token]:
    if len(src) > MAX_SOURCE:
        raise ExprError(f"expression longer than {MAX_SOURCE} characters")
    tokens: list[Token] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        col = i + 1
        if c in " \t\r\n":
            i += 1
        elif "0" <= c <= "9":  # ASCII only: str.isdigit() accepts '²', which int() refuses
            j = i
            while j < n and ("0" <= src[j] <= "9" or src[j] == "_"):
                j += 1
            is_float = j < n and src[j] == "." and j + 1 < n and "0" <= src[j + 1] <= "9"
            if is_float:
                j += 1
                while j < n and "0" <= src[j] <= "9":
                    j += 1
            text = src[i:j]
            if len(text) > 80:
                raise ExprError(f"{'number' if is_float else 'integer'} literal too long", col)
            try:
                tokens.append(Token("FLOAT", float(text), col) if is_float else Token("INT", int(text), col))
            except ValueError:  # misplaced underscores: 1__0, 1_
                raise ExprError(f"invalid number {text!r}", col) from None
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            tokens.append(Token("NAME", src[i:j], col))
            i = j
        elif c in "\"'":
            j = i + 1
            out = []
            while j < n and src[j] != c:
                if src[j] == "\\" and j + 1 < n:
                    esc = src[j + 1]
                    out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}.get(esc, "\\" + esc))
                    j += 2
                else:
                    out.append(src[j])
                    j += 1
            if j >= n:
                raise ExprError("unterminated string", col)
            tokens.append(Token("STR", "".join(out), col))
            i = j + 1
        elif src[i : i + 2] in _TWO_CHAR:
            tokens.append(Token("OP", src[i : i + 2], col))
            i += 2
        elif c in _ONE_CHAR:
            tokens.append(Token("OP", c, col))
            i += 1
        else:
            raise ExprError(f"unexpected character {c!r}", col)
    tokens.append(Token("EOF", None, n + 1))
    return tokens
