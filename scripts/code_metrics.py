"""Size and hygiene figures of the ``moralkit`` package (issue 29's acceptance figures).

``python scripts/code_metrics.py`` prints one JSON object: the largest modules, the longest functions,
the number of functions over 80 lines, plain ``ValueError``/``TypeError`` raises (outside ``psm/`` and
the documented exceptions, the ``MoralkitError`` family is promised), cross-module re-exports (a name a
module lists in ``__all__`` but imports from another ``moralkit`` module; package ``__init__`` files,
which exist to gather names, are not counted), and notebook code sizes.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _all_names(tree) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                return set()
    return set()


def _imported_from_moralkit(tree, module: str) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("moralkit")):
            for alias in node.names:
                names.add(alias.asname or alias.name)
    return names


def plain_raises() -> list[str]:
    """``path:line`` of every ``raise ValueError(...)`` / ``raise TypeError(...)`` in the package."""
    out = []
    for path in sorted((ROOT / "moralkit").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id in ("ValueError", "TypeError"):
                    out.append(f"{rel}:{node.lineno}")
    return out


def package_metrics() -> dict:
    modules, functions, plain, reexports = [], [], [], []
    for path in sorted((ROOT / "moralkit").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        tree = ast.parse(text)
        modules.append((len(text.splitlines()), rel))
        for fn in _functions(tree):
            functions.append((fn.end_lineno - fn.lineno + 1, f"{rel}:{fn.name}"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id in ("ValueError", "TypeError"):
                    plain.append(f"{rel}:{node.lineno}")
        if path.name != "__init__.py":
            shared = _all_names(tree) & _imported_from_moralkit(tree, rel)
            reexports.extend(f"{rel}:{name}" for name in sorted(shared))
    modules.sort(reverse=True)
    functions.sort(reverse=True)
    return {
        "largest_modules": [f"{rel} ({n})" for n, rel in modules[:5]],
        "modules_ge_600": sum(n >= 600 for n, _ in modules),
        "longest_functions": [f"{name} ({n})" for n, name in functions[:5]],
        "functions_gt_80": sum(n > 80 for n, _ in functions),
        "plain_value_type_errors": len(plain),
        "plain_value_type_errors_outside_psm": sum("/psm/" not in p for p in plain),
        "cross_module_reexports": len(reexports),
        "reexports": reexports,
    }


def notebook_metrics() -> dict:
    """Code lines per notebook and its longest code cell; papermill's ``parameters`` cell (one declaration per
    line, no logic) is reported on its own and not counted as the longest cell."""
    out = {}
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        cells, current, in_code, params, is_params = [], 0, False, 0, False

        def close():
            nonlocal params
            if in_code:
                if is_params:
                    params = current
                else:
                    cells.append(current)

        for line in path.read_text().splitlines():
            if line.startswith("# %%"):
                close()
                in_code, current, is_params = "[markdown]" not in line, 0, '"parameters"' in line
            elif in_code and line.strip() and not line.lstrip().startswith("#"):
                current += 1
        close()
        out[path.name] = {"code_lines": sum(cells) + params, "longest_cell": max(cells, default=0),
                          "parameters_cell": params}
    return out


if __name__ == "__main__":
    result = {"package": package_metrics(), "notebooks": notebook_metrics()}
    json.dump(result, sys.stdout, indent=1)
    print()
