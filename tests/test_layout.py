"""The source layout's rules: no import cycles between spmdgpt's modules, counting the imports
inside functions too (a cycle hidden in a function is still a cycle: the two modules cannot be
read, tested or moved apart)."""

import ast
from pathlib import Path

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
    assert len(graph) > 40 and "spmdgpt.train_step" in graph["spmdgpt.stats"]
    assert cycles(graph) == []
    # the check finds one when there is one
    assert cycles({**graph, "spmdgpt.train_step": graph["spmdgpt.train_step"] | {"spmdgpt.stats"}}) == [
        ["spmdgpt.stats", "spmdgpt.train_step"]]
