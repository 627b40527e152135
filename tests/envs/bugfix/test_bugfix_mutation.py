"""Mutation check of the hidden tests: every mutant of every reference solution gets reward 0, unless it is shown
equivalent on an independent, larger set of inputs. The per-task mutation score in docs/bugfix.md is this test's
output (``PYTHONPATH=tests python tests/envs/bugfix/test_bugfix_mutation.py`` rewrites that table; the test checks
that it is current).

Mutants are single changes of the correct source: operator swaps (+ - * / // %), comparison flips (is and in
too), off-by-one constants and range bounds, rounding and truncation swaps (round, int, / and //), removed guards
(an ``if`` whose body returns), min and max swapped, and/or swapped, a removed ``not`` or unary minus.
"""

import ast
import copy
import re
import sys

import pytest

from pglab.envs.bugfix import BugFixEnv, Grader, Sandbox, make_tasks, same
from pglab.envs.bugfix.inputs import generated_inputs
from support import ROOT

pytestmark = pytest.mark.integration

DOC = ROOT / "docs" / "bugfix.md"
START, END = "<!-- mutation table: start -->", "<!-- mutation table: end -->"
CHECK_INPUTS = 3000
"""Inputs (another seed) on which a surviving mutant must agree with the reference to count as equivalent."""
BINOPS = {ast.Add: [ast.Sub, ast.Mult], ast.Sub: [ast.Add], ast.Mult: [ast.Add, ast.Div], ast.Div: [ast.FloorDiv,
          ast.Mult], ast.FloorDiv: [ast.Div], ast.Mod: [ast.FloorDiv]}
COMPARE = {ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE], ast.Gt: [ast.GtE, ast.Lt],
           ast.GtE: [ast.Gt, ast.LtE], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.Is: [ast.IsNot],
           ast.IsNot: [ast.Is], ast.In: [ast.NotIn], ast.NotIn: [ast.In]}
AUGOPS = {ast.Add: [ast.Sub, ast.Mult], ast.Mult: [ast.Add], ast.Sub: [ast.Add]}
WRONG_REPAIRS = {
    "rounding a / p where the task floors": ("share", "def share(amount, people):\n    if people == 0:\n"
                                             "        return 0\n    return round(amount / people)\n"),
    "truncating where the task rounds": ("percent", "def percent(part, whole):\n    if whole == 0:\n"
                                         "        return 0\n    return int(1000 * part / whole) / 10\n"),
    "a closed form without the guard for small inputs": ("sum_to", "def sum_to(n):\n    return n * (n + 1) // 2\n"),
    "a closed form without the guard (square_series)": (
        "square_series", "def square_series(m):\n    return m * (m + 1) * (2 * m + 1) // 6\n"),
    ">= 1 where the task means > 0 for non-integers": (
        "count_positive", "def count_positive(xs):\n    count = 0\n    for x in xs:\n        if x >= 1:\n"
                          "            count += 1\n    return count\n"),
}


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _changes(node: ast.AST) -> list[tuple[str, ast.AST | None]]:
    """(label, replacement) for each single mutation of ``node``; replacement None removes the statement."""
    out: list[tuple[str, ast.AST | None]] = []
    if isinstance(node, ast.BinOp):
        for op in BINOPS.get(type(node.op), []):
            out.append((f"{type(node.op).__name__} -> {op.__name__}", ast.BinOp(node.left, op(), node.right)))
        if isinstance(node.op, (ast.Div, ast.FloorDiv)):
            true_div = ast.BinOp(node.left, ast.Div(), node.right)
            out += [("division rounded", _call("round", true_div)), ("division truncated", _call("int", true_div))]
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        for op in COMPARE.get(type(node.ops[0]), []):
            out.append((f"{type(node.ops[0]).__name__} -> {op.__name__}",
                        ast.Compare(node.left, [op()], node.comparators)))
    elif isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            for new in COMPARE.get(type(op), []):
                ops = [*node.ops[:k], new(), *node.ops[k + 1:]]
                out.append((f"{type(op).__name__} -> {new.__name__} (chain {k})",
                            ast.Compare(node.left, ops, node.comparators)))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        out += [(f"{node.value} -> {node.value + d}", ast.Constant(node.value + d)) for d in (1, -1)]
    elif isinstance(node, ast.AugAssign):
        for op in AUGOPS.get(type(node.op), []):
            out.append((f"{type(node.op).__name__}= -> {op.__name__}=", ast.AugAssign(node.target, op(), node.value)))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name, args = node.func.id, node.args
        if name in ("min", "max"):
            out.append((f"{name} -> {'max' if name == 'min' else 'min'}",
                        _call("max" if name == "min" else "min", *args)))
        if name == "round":
            out += [("round -> int (truncation)", _call("int", args[0])),
                    ("round without digits", _call("round", args[0]))]
            if len(args) == 2:
                scaled = ast.BinOp(args[0], ast.Mult(), ast.BinOp(ast.Constant(10), ast.Pow(), args[1]))
                out.append(("round -> truncation at the same digits", ast.BinOp(
                    _call("int", scaled), ast.Div(), ast.BinOp(ast.Constant(10), ast.Pow(), args[1]))))
        if name == "range":
            for k, arg in enumerate(args):
                for d, op in ((1, ast.Add), (-1, ast.Sub)):
                    bumped = [*args[:k], ast.BinOp(arg, op(), ast.Constant(1)), *args[k + 1:]]
                    out.append((f"range argument {k} {d:+d}", _call("range", *bumped)))
    elif isinstance(node, ast.BoolOp):
        out.append(("and <-> or", ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        out.append((f"{type(node.op).__name__} removed", node.operand))
    elif isinstance(node, ast.If) and node.body and isinstance(node.body[-1], ast.Return) and not node.orelse:
        out.append(("guard removed", None))
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, target: int, new: ast.AST | None):
        self.target, self.new, self.index = target, new, -1

    def visit(self, node):
        self.index += 1
        if self.index == self.target:
            return self.new
        return self.generic_visit(node)


def mutants(source: str) -> list[tuple[str, str]]:
    """(label, source) of every single-change mutant of ``source`` that parses and differs from it as text."""
    tree = ast.parse(source)
    count = sum(1 for _ in _preorder(tree))
    found: dict[str, str] = {}
    for index in range(count):
        node = next(n for k, n in enumerate(_preorder(tree)) if k == index)
        for label, new in _changes(node):
            mutated = _Replace(index, copy.deepcopy(new) if new is not None else None).visit(copy.deepcopy(tree))
            try:
                text = ast.unparse(ast.fix_missing_locations(mutated)) + "\n"
                compile(text, "<mutant>", "exec")
            except (SyntaxError, ValueError, TypeError):
                continue
            if text != ast.unparse(tree) + "\n":
                found.setdefault(text, label)
    return [(label, text) for text, label in found.items()]


def _preorder(node: ast.AST):
    """Nodes in the order _Replace visits them."""
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _preorder(child)


def outputs(source: str, name: str, inputs: list[tuple]) -> list:
    """The function's result (or its exception's type name) on each input, run here: the reference solutions and
    their mutants are this project's own code."""
    namespace: dict = {}
    exec(compile(source, "<mutant>", "exec"), namespace)  # noqa: S102
    found = []
    for args in inputs:
        try:
            found.append(("value", namespace[name](*[copy.deepcopy(a) for a in args])))
        except Exception as err:  # noqa: BLE001
            found.append(("raises", type(err).__name__))
    return found


def agrees(got: list, expected: list) -> bool:
    return all(g[0] == e[0] and (same(g[1], e[1]) if g[0] == "value" else g[1] == e[1]) for g, e in zip(got, expected))


def mutation_rows(grader: Grader) -> tuple[list[dict], list[str]]:
    """Per task: mutants, killed by the fixed hidden cases alone, killed by the grader (reward 0), shown equivalent;
    and the labels of surviving mutants that are not equivalent (must be empty)."""
    tasks, programs = make_tasks("all"), []
    for task in tasks:
        programs += [(task, label, text) for label, text in mutants(task.fixed)]
    grades = grader.grade_many([(task, text) for task, _, text in programs])
    rows, escaped = [], []
    for task in tasks:
        mine = [(p, g) for p, g in zip(programs, grades) if p[0] is task]
        fixed_args = [c.args for c in task.visible + task.hidden]
        check = generated_inputs(task.name, CHECK_INPUTS, seed="-check", source=task.fixed)
        reference_fixed, reference_check = outputs(task.fixed, task.name, fixed_args), None
        killed_fixed = killed = equivalent = 0
        for (_, label, text), grade in mine:
            killed_fixed += not agrees(outputs(text, task.name, fixed_args), reference_fixed)
            if not grade.hidden_pass:
                killed += 1
                continue
            reference_check = reference_check or outputs(task.fixed, task.name, check)
            if agrees(outputs(text, task.name, check), reference_check):
                equivalent += 1
            else:
                escaped.append(f"{task.name}: {label}")
        rows.append({"task": task.name, "mutants": len(mine), "killed by the fixed hidden cases": killed_fixed,
                     "killed (reward 0)": killed, "equivalent": equivalent,
                     "score": killed / max(1, len(mine) - equivalent)})
    return rows, escaped


def table(rows: list[dict]) -> str:
    """The markdown table of docs/bugfix.md."""
    head = ["task", "mutants", "killed by the fixed hidden cases", "killed (reward 0)", "equivalent", "score"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append(f"| {r['task']} | {r['mutants']} | {r['killed by the fixed hidden cases']} | "
                     f"{r['killed (reward 0)']} | {r['equivalent']} | {r['score']:.2f} |")
    total = {k: sum(r[k] for r in rows) for k in head[1:5]}
    lines.append(f"| all | {total['mutants']} | {total['killed by the fixed hidden cases']} | "
                 f"{total['killed (reward 0)']} | {total['equivalent']} | "
                 f"{total['killed (reward 0)'] / (total['mutants'] - total['equivalent']):.2f} |")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def grader():
    grader = Grader(Sandbox(workers=2))
    yield grader
    grader.sandbox.close()


def test_mutant_generator_makes_every_kind_of_change():
    labels = {label for label, _ in mutants(make_tasks("all")[-2].fixed)}  # share: guard, floor division
    assert {"guard removed", "division rounded", "division truncated", "FloorDiv -> Div", "0 -> 1"} <= labels
    assert any(label.startswith("range argument") for task in make_tasks("all") for label, _ in mutants(task.fixed))


@pytest.mark.parametrize("name", WRONG_REPAIRS)
def test_wrong_repairs_written_by_an_agent_get_reward_0(name, grader):
    task_name, source = WRONG_REPAIRS[name]
    task = next(t for t in make_tasks("all") if t.name == task_name)
    env = BugFixEnv("all", grader=grader, allow_write=True)
    env.reset(options={"task": task})
    env.step(f"<call> write\n{source}</call>")
    _, reward, terminated, _, info = env.step("<call> submit </call>")
    assert terminated and info["ops"] == ["write"] and reward == 0.0 and info["outcome"] == "fail"


def test_every_mutant_gets_reward_0_or_is_equivalent_and_the_docs_table_is_current(grader):
    rows, escaped = mutation_rows(grader)
    assert not escaped, f"mutants that pass the hidden tests but differ from the reference: {escaped}"
    current = DOC.read_text().split(START)[1].split(END)[0].strip()
    assert current == table(rows), ("docs/bugfix.md's mutation table is stale: "
                                    "run PYTHONPATH=tests python tests/envs/bugfix/test_bugfix_mutation.py")


if __name__ == "__main__":  # rewrite the table in docs/bugfix.md
    box = Sandbox(workers=2)
    rows, escaped = mutation_rows(Grader(box))
    box.close()
    text = DOC.read_text()
    if START not in text:
        sys.exit(f"docs/bugfix.md has no {START} ... {END} block")
    DOC.write_text(re.sub(f"{re.escape(START)}.*?{re.escape(END)}", f"{START}\n{table(rows)}\n{END}", text,
                          flags=re.DOTALL))
    print(table(rows), "\nescaped:", escaped)
