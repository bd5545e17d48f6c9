"""The source layout's rules: no import cycles between spmdgpt's modules, and no import from a
lower floor to a higher one (`FLOORS`), counting the imports inside functions too (a cycle or
an upward arrow hidden in a function is still one: the modules cannot be read, tested or moved
apart)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"


def import_graph() -> dict:
    """{module: the spmdgpt modules it imports anywhere in its file}."""
    files = {".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (SRC / "spmdgpt").rglob("*.py")}
    graph = {m: set() for m in files}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("spmdgpt"):
                for alias in node.names:  # `from spmdgpt.a import b`: module a.b if there is one, else a
                    graph[module].add(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in files
                                      else node.module)
            elif isinstance(node, ast.Import):
                graph[module].update(a.name for a in node.names if a.name in files)
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_also_inside_functions():
    graph = import_graph()
    assert len(graph) > 40 and "spmdgpt.training.step" in graph["spmdgpt.training.stats"]
    assert cycles(graph) == []
    # the check finds one when there is one
    assert cycles({**graph, "spmdgpt.training.step": graph["spmdgpt.training.step"] | {"spmdgpt.training.stats"}}) == [
        ["spmdgpt.training.stats", "spmdgpt.training.step"]]


# The house's floors, low to high: the parts of src/spmdgpt/, each a package (or, at the top, the
# loop and the kinds of run). A module imports only from its own floor or below (the model never
# reaches up into a kind of run, a kind of run never into the loop or the CLI); a module is on
# the floor of its part, and every module belongs to one.
FLOORS = {
    0: ("spmdgpt.config", "spmdgpt.configs", "spmdgpt.mesh", "spmdgpt.run"),
    1: ("spmdgpt.model", "spmdgpt.data", "spmdgpt.optim", "spmdgpt.hf", "spmdgpt.tasks", "spmdgpt.web"),
    2: ("spmdgpt.training", "spmdgpt.engine"),
    3: ("spmdgpt.eval",),
    4: ("spmdgpt.plan",),
    5: ("spmdgpt.scaling", "spmdgpt.rl"),
    6: ("spmdgpt.kinds",),
    7: ("spmdgpt.loop",),
    8: ("spmdgpt.cli", "spmdgpt.__main__", "spmdgpt"),
}


def floor(module: str) -> int:
    """The floor of `module`'s part (the package `spmdgpt` itself: the top); KeyError if none."""
    for n, parts in FLOORS.items():
        if module in parts or any(module.startswith(p + ".") for p in parts if p != "spmdgpt"):
            return n
    raise KeyError(f"{module} is in no part of FLOORS")


def upward(graph: dict) -> list:
    """(importer, imported) pairs where the imported module sits on a higher floor."""
    return sorted((m, d) for m, deps in graph.items() for d in deps if floor(d) > floor(m))


def test_no_import_reaches_up_a_floor_also_inside_functions():
    graph = import_graph()
    assert upward(graph) == []
    assert floor("spmdgpt.model.grpo") == 1 and floor("spmdgpt.rl.checks") == 5 and floor("spmdgpt.plan.plan") == 4
    assert floor("spmdgpt") == 8 and [floor(m) for m in graph] and len({floor(m) for m in graph}) == 9
    with pytest.raises(KeyError, match="spmdgpt.stray is in no part"):
        floor("spmdgpt.stray")
    # the loop names no kind of run: it asks spmdgpt.kinds for the run's
    assert not {d for d in graph["spmdgpt.loop"] if d.startswith("spmdgpt.rl")}
    # the check finds one when there is one (the model's GRPO loss importing the rewards, as it did)
    assert upward({**graph, "spmdgpt.model.grpo": graph["spmdgpt.model.grpo"] | {"spmdgpt.rl.rewards"}}) == [
        ("spmdgpt.model.grpo", "spmdgpt.rl.rewards")]
