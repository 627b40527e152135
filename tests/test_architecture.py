"""The layers of SPEC: imports point downward only, experiments never import each other, --list is lazy."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "pglab"
UTILITIES = {"reporting", "runtime", "stats"}
"""Shared helpers beside the layers: importable from any layer, importing no layer themselves."""
RANKS = {"estimators": 0, "batch": 1, "data": 2, "envs": 3, "models": 4, "sampling": 5, "trainers": 6,
         "runner": 7, "audit": 8, "conform": 8, "experiments": 9, "apps": 10, "bench": 11, "web": 12, "cli": 13,
         "__main__": 13}
"""Layer of each top-level module or package of pglab, from SPEC's diagram (bottom = 0)."""


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py" or p.parent != SRC)


def top(dotted: str) -> str:
    return dotted.split(".")[1] if dotted.startswith("pglab.") else ""


def imported(path: Path) -> set[str]:
    """Every pglab module that ``path`` imports (absolute or relative, at any depth of the file)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("pglab")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("pglab"):
                found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return found


def own_top(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_downward(path):
    me = own_top(path)
    assert me in RANKS or me in UTILITIES, f"{me} has no layer: add it to RANKS or UTILITIES"
    for name in imported(path):
        other = top(name)
        if not other or other == me or other == "__version__":
            continue
        if me in UTILITIES:
            assert other in UTILITIES, f"{path.name}: the utility {me} imports the layer {other}"
        elif other not in UTILITIES:
            assert other in RANKS, f"{path.name} imports {name}, which has no layer"
            assert RANKS[other] <= RANKS[me], f"{path.relative_to(SRC)} imports {name}, a layer above its own"


def module_of(dotted: str) -> str | None:
    """The pglab module file behind an imported name (``pglab.models.hf.load_causal_lm`` -> ``pglab.models.hf``)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        path = SRC.parent.joinpath(*parts[:end])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(parts[:end])
    return None


def import_graph() -> dict[str, set[str]]:
    """Module -> the pglab modules it imports, at any depth of the file (imports inside functions count)."""
    graph = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names = imported(path)
        # ``from pglab.models import gpt2`` imports the module gpt2, not (only) the package's __init__
        named = {n for n in names if module_of(n) == n}
        names -= {n for n in names if any(m.startswith(n + ".") for m in named)}
        graph[name] = {m for m in map(module_of, names) if m and m != name}
    return graph


def test_no_import_cycle():
    """Depth-first search for a back edge; a package's own __init__ running first is not an edge."""
    graph, state, stack = import_graph(), {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if state.get(other) == "open":
                cycle = stack[stack.index(other):] + [other]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if other not in state:
                visit(other)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


CORE = ("trainers", "sampling", "models", "estimators", "audit")
"""The token-RL core, where a reader must see each function in one screen."""


def test_no_core_function_over_60_lines_or_10_parameters():
    """Settings travel as dataclasses: a function of the core takes at most 10 parameters and spans at most 60 lines."""
    found = []
    for path in (p for room in CORE for p in sorted((SRC / room).rglob("*.py"))):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
                count = len(params) - (bool(a.args) and a.args[0].arg in ("self", "cls"))
                lines = node.end_lineno - node.lineno + 1
                if lines > 60 or count > 10:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {lines} lines, {count} params")
    assert not found, found


def test_estimators_import_torch_only():
    for path in (SRC / "estimators").glob("*.py"):
        others = {top(n) for n in imported(path)} - {"estimators"}
        assert not others, f"{path.name} imports {others}"
        roots = {n.split(".")[0] for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, (ast.Import, ast.ImportFrom))
                 for n in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])}
        assert roots <= {"torch", "math", "__future__", "collections", "typing", "dataclasses", "pglab", ""}, roots


def test_no_experiment_imports_another():
    experiments = {p.stem for p in (SRC / "experiments").glob("*.py")} - {"__init__", "registry"}
    for name in experiments:
        for other in imported(SRC / "experiments" / f"{name}.py"):
            assert other.split(".")[-1] not in experiments - {name} and not any(
                other.startswith(f"pglab.experiments.{e}") for e in experiments - {name}), f"{name} imports {other}"


@pytest.mark.integration
def test_list_imports_no_experiment_module():
    code = ("import sys; from pglab.cli import main; main(['reproduce', '--list']); "
            "print(sorted(m for m in sys.modules if m.startswith('pglab.experiments.') "
            "and m != 'pglab.experiments.registry'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def calls(path: Path) -> list[tuple[str, ast.AST]]:
    """(dotted name, node) of every call in ``path``: ``torch.save``, ``json.dumps``, ``leave_one_out``..."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            parts, target = [], node.func
            while isinstance(target, ast.Attribute):
                parts.append(target.attr)
                target = target.value
            if isinstance(target, ast.Name):
                parts.append(target.id)
            found.append((".".join(reversed(parts)), node))
    return found


def places(predicate) -> set[str]:
    return {str(p.relative_to(SRC)) for p in modules() if any(predicate(name, node) for name, node in calls(p))}


def json_lines(path: Path) -> bool:
    """Whether ``path`` builds a JSON line: ``json.dumps(...) + "\\n"``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            sides = (node.left, node.right)
            if any(isinstance(s, ast.Call) and ast.unparse(s.func) == "json.dumps" for s in sides) and any(
                    isinstance(s, ast.Constant) and s.value == "\n" for s in sides):
                return True
    return False


def test_one_checkpoint_writer_resume_check_and_jsonl_writer():
    savers = places(lambda name, _: name in ("torch.save", "torch.load"))
    assert savers <= {"trainers/loop.py"}, savers
    logs = {str(p.relative_to(SRC)) for p in modules() if json_lines(p) and own_top(p) != "envs"}
    assert logs == {"trainers/loop.py"}, f"{logs}: the sandbox's wire protocol aside, JSON lines go through RunDir"
    resume = {str(p.relative_to(SRC)) for p in modules() if "cannot resume" in p.read_text()}
    assert resume == {"trainers/loop.py"}, resume


def test_one_token_log_prob_function():
    """log_softmax(...).gather(...) over token ids: scoring.py; the sampler's own draw; CartPole's actions; the
    enumerable LM environment, which scores its own replies from logits (envs sits below sampling)."""
    def token_logp(name, node):
        return name.endswith("gather") and "log_softmax" in ast.unparse(node.func)
    assert places(token_logp) <= {"sampling/scoring.py", "sampling/episodes.py", "trainers/cartpole.py",
                                  "envs/enumerable.py"}


def test_one_advantage_dispatcher():
    """The advantage kinds are compared against in estimators/advantages.py alone."""
    kinds = {"reinforce", "rloo", "grpo", "dr_grpo", "loo", "ema"}
    found = set()
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in kinds
                                                     for c in [node.left, *node.comparators]):
                found.add(str(path.relative_to(SRC)))
    assert found <= {"estimators/advantages.py", "trainers/lm/config.py"}, found
