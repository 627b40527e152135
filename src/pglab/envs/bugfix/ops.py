"""The five repair ops: generic source transformations, each aimed at one bug family.

Every op takes any Python source and returns a source. It locates its targets with ``ast`` or
``tokenize`` and splices text at their positions, so formatting and comments survive. An op that
finds nothing to change, or whose result would not parse, returns the source unchanged.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable, Iterator
from functools import lru_cache, wraps

Edit = tuple[int, int, str]  # (start offset, end offset, replacement) in characters

IDENTITY = {ast.Add: 0, ast.Sub: 0, ast.Mult: 1}
DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)
ATOMS = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.UnaryOp, ast.BinOp)
BITWISE = (ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor)


def _total(op: Callable[[str], str]) -> Callable[[str], str]:
    """Make an op total: a source that does not parse or tokenize is returned unchanged."""

    @wraps(op)
    def safe(source: str) -> str:
        try:
            return op(source)
        except (SyntaxError, ValueError, RecursionError, tokenize.TokenError):  # ValueError: null bytes
            return source

    return safe


def _splice(source: str, edits: list[Edit]) -> str:
    """Apply non-overlapping edits; a result that does not parse leaves the source as it was."""
    if not edits:
        return source
    out = source
    for start, end, text in sorted(set(edits), reverse=True):
        out = out[:start] + text + out[end:]
    try:
        ast.parse(out)
    except SyntaxError:
        return source
    return out


def _line_starts(source: str) -> list[int]:
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


class _Source:
    """A parsed source with character offsets for ast positions (which count UTF-8 bytes)."""

    def __init__(self, source: str):
        self.text = source
        self.tree = ast.parse(source)
        self.lines = source.splitlines(keepends=True)
        self.starts = _line_starts(source)

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1] if lineno <= len(self.lines) else ""
        return self.starts[lineno] + len(line.encode()[:col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST, loose: tuple[type, ...] = ()) -> str:
        """The node's text, parenthesised unless it binds tighter than an operator of ``loose`` precedence."""
        start, end = self.span(node)
        text = self.text[start:end]
        tight = isinstance(node, ATOMS) and not (isinstance(node, ast.BinOp) and isinstance(node.op, loose))
        return text if tight else f"({text})"

    def replace(self, node: ast.AST, text: str) -> Edit:
        return (*self.span(node), text)


def _blocks(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement list (body, else branch, finally branch) in the tree."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _number(node: ast.AST) -> float | None:
    """The value of a numeric literal (``3``, ``-1``, ``0.5``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _number(node.operand)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _loop_updates(stmt: ast.stmt, name: str) -> Iterator[type]:
    """Operator types of ``name OP= ...`` inside ``stmt`` when it is a loop."""
    if not isinstance(stmt, (ast.For, ast.While)):
        return
    for node in ast.walk(stmt):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            yield type(node.op)


@_total
def fix_init(source: str) -> str:
    """Reset each numeric accumulator to the identity of the loop update that follows it (+= 0, *= 1)."""
    src = _Source(source)
    edits = []
    for block in _blocks(src.tree):
        for i, stmt in enumerate(block):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and _number(stmt.value) is not None):
                continue
            ops = [op for later in block[i + 1:] for op in _loop_updates(later, stmt.targets[0].id)]
            if not ops or ops[0] not in IDENTITY:
                continue
            identity = IDENTITY[ops[0]]
            if _number(stmt.value) != identity:
                literal = f"{float(identity)}" if isinstance(_number(stmt.value), float) else str(identity)
                edits.append(src.replace(stmt.value, literal))
    return _splice(source, edits)


def _range_stop(node: ast.AST) -> ast.AST | None:
    """The stop argument of a ``range(...)`` call, else None."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and 1 <= len(node.args) <= 3 and not node.keywords):
        return node.args[0] if len(node.args) == 1 else node.args[1]
    return None


def _plus_one(src: _Source, stop: ast.AST) -> str:
    """Source of ``stop + 1``, folding ``x - 1`` into ``x`` and ``x + c`` into ``x + (c + 1)``."""
    if isinstance(stop, ast.BinOp) and isinstance(stop.op, (ast.Add, ast.Sub)) and type(_number(stop.right)) is int:
        step = _number(stop.right) + (1 if isinstance(stop.op, ast.Add) else -1)
        left = src.segment(stop.left, loose=BITWISE)
        return left if step == 0 else f"{left} {'+' if step > 0 else '-'} {abs(step)}"
    return f"{src.segment(stop, loose=BITWISE)} + 1"


@_total
def fix_range_end(source: str) -> str:
    """Extend every ``for ... in range(...)`` loop (and comprehension) by one: stop -> stop + 1."""
    src = _Source(source)
    loops = [n.iter for n in ast.walk(src.tree) if isinstance(n, (ast.For, ast.comprehension))]
    stops = [stop for stop in map(_range_stop, loops) if stop is not None]
    return _splice(source, [src.replace(stop, _plus_one(src, stop)) for stop in stops])


def _is_zero_guard(stmt: ast.stmt, divisor: ast.AST) -> bool:
    """True for ``if DIVISOR == 0: ...``."""
    test = getattr(stmt, "test", None)
    return (isinstance(stmt, ast.If) and isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq) and _number(test.comparators[0]) == 0
            and ast.dump(test.left) == ast.dump(divisor))


def _is_elif(src: _Source, block: list[ast.stmt]) -> bool:
    """True for the ``orelse`` block of an if statement that is written as ``elif``."""
    first = block[0]
    return len(block) == 1 and isinstance(first, ast.If) and src.lines[first.lineno - 1].lstrip().startswith("elif")


def _header(src: _Source, stmt: ast.stmt) -> list[ast.AST]:
    """What runs before a statement's body: all of a simple statement, a compound one's test or
    iterable, and the tests of an if statement's elif chain."""
    if not hasattr(stmt, "body"):
        return [stmt]
    parts = [getattr(stmt, k) for k in ("test", "iter") if hasattr(stmt, k)]
    if isinstance(stmt, ast.If) and stmt.orelse and _is_elif(src, stmt.orelse):
        parts += _header(src, stmt.orelse[0])
    return parts


def _divisors(src: _Source, stmt: ast.stmt) -> list[ast.AST]:
    """Distinct divisors (not nonzero literals) of the divisions in a statement's header."""
    found: list[ast.AST] = []
    for part in _header(src, stmt):
        for node in ast.walk(part):
            if isinstance(node, ast.BinOp) and isinstance(node.op, DIVISIONS) and not _number(node.right):
                if all(ast.dump(node.right) != ast.dump(d) for d in found):
                    found.append(node.right)
    return found


@_total
def add_zero_guard(source: str) -> str:
    """Before each statement inside a function that divides by X, insert ``if X == 0: return 0``."""
    src = _Source(source)
    functions = [n for n in ast.walk(src.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    in_function = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    edits = []
    for block in _blocks(src.tree):
        if _is_elif(src, block):
            continue
        guarded: list[str] = []
        for i, stmt in enumerate(block):
            if id(stmt) not in in_function:
                continue
            missing = [d for d in _divisors(src, stmt) if not any(_is_zero_guard(s, d) for s in block[:i])]
            missing = [d for d in missing if ast.dump(d) not in guarded]
            guarded += [ast.dump(d) for d in missing]
            if missing:
                line = src.lines[stmt.lineno - 1]
                indent = line[: len(line) - len(line.lstrip())]
                guards = "".join(f"{indent}if {src.segment(d)} == 0:\n{indent}    return 0\n" for d in missing)
                start = src.offset(stmt.lineno, 0)
                edits.append((start, start, guards))
    return _splice(source, edits)


def _retoken(source: str, mapping: dict[tuple[int, str], str]) -> str:
    """Replace every token whose (type, string) is in ``mapping``."""
    src_lines = _line_starts(source)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits = [
        (src_lines[tok.start[0]] + tok.start[1], src_lines[tok.end[0]] + tok.end[1], mapping[(tok.type, tok.string)])
        for tok in tokens if (tok.type, tok.string) in mapping
    ]
    return _splice(source, edits)


@_total
def swap_minmax(source: str) -> str:
    """Swap every name ``min`` with ``max`` (an involution: applying it twice restores the source)."""
    return _retoken(source, {(tokenize.NAME, "min"): "max", (tokenize.NAME, "max"): "min"})


@_total
def fix_comparison(source: str) -> str:
    """Make every strict ordering comparison inclusive: ``<`` -> ``<=``, ``>`` -> ``>=`` (idempotent)."""
    return _retoken(source, {(tokenize.OP, "<"): "<=", (tokenize.OP, ">"): ">="})


OPS: dict[str, Callable[[str], str]] = {
    "fix_init": fix_init,
    "swap_minmax": swap_minmax,
    "fix_range_end": fix_range_end,
    "add_zero_guard": add_zero_guard,
    "fix_comparison": fix_comparison,
}
OP_NAMES: tuple[str, ...] = tuple(OPS)


@lru_cache(maxsize=1 << 16)
def apply_op(op: str, source: str) -> str:
    """``OPS[op](source)``, memoised."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; pass one of {', '.join(OP_NAMES)}")
    return OPS[op](source)
