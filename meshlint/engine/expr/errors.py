"""The expression language's exceptions, and the value of an unknown fact."""

from __future__ import annotations

from meshlint.record import Record



class ExprError(Exception):
    """A syntax error in an expression; ``col`` is 1-based within the source."""

    def __init__(self, message: str, col: int | None = None):
        super().__init__(message)
        self.message = message
        self.col = col

    def __str__(self) -> str:
        return f"{self.message} (column {self.col})" if self.col else self.message


class EvalError(Exception):
    """A runtime error: bad operand types, a bound or the step budget exceeded."""


# What may escape an expression's function and how ``Expr.evaluate`` words it (the net under the checks of each
# operation); a rule's when and check, evaluated inline by engine/run.py, use the same net.
NET = (RecursionError, MemoryError, TypeError, ValueError, ArithmeticError)


def evaluation_error(exc: BaseException) -> EvalError:
    if isinstance(exc, RecursionError):
        return EvalError("evaluation nested too deeply (let bindings or values)")
    if isinstance(exc, MemoryError):
        return EvalError("out of memory")
    return EvalError(f"{type(exc).__name__}: {str(exc)[:200]}")


class NeedFact(Exception):
    """Evaluation touched an unknown fact; ``path`` names it (e.g. ``world_size``)."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class Missing(Record):
    """The value of an unknown fact, remembering which fact it was."""

    path: str
