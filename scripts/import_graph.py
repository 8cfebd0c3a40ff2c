#!/usr/bin/env python3
"""The project's import graph, measured from the code (issue 22: arrows point one way).

Parses every project module with `ast` (no import, no Django; well under a second) and prints:
arrows into the settings package `clawgym_site` from other packages, arrows from `lib` into any
app, imports of Django or of an app by the plain libraries (`sandbox`, `training`), circles between
apps (module-level imports only, and with imports inside functions too),
circles inside each app (module level), imports inside functions per app, with those that
load torch/transformers/trl and the like lazily on purpose (allowed by shared/STYLE.md rule 11),
and the modules of the apps and libraries over 600 lines, outside tests.

Only `import` statements count: Django settings read through `django.conf` and dotted strings
such as `settings.CLAWGYM_CELERY_APP` are not arrows. `from pkg import name` where `name` is a
submodule counts as importing the submodule.

    .venv/bin/python scripts/import_graph.py [--root DIR] [--json]

`--json` prints the figures as one JSON object on the last line.
"""

import argparse
import ast
import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

SETTINGS_PACKAGE = "clawgym_site"
# A module past this many lines holds more than one thing: split it along a seam (a maintainer reads it whole). The
# settings package is configuration, and bench/ and scripts/ hold programs run by hand, each read as one story.
MAX_MODULE_LINES = 600
NOT_MEASURED = {SETTINGS_PACKAGE, "bench", "scripts"}
LIBRARY_PACKAGE = "lib"
# Plain libraries (STYLE rule 19): they import no Django and no app, only each its own modules and the `lib` modules
# that import no Django either, so that they run where Django is not set up (a trainer subprocess, a model server's
# front, a sandbox worker's library) and can be read without the apps.
PLAIN_LIBRARIES = ("sandbox", "training")
DJANGO_PACKAGES = {"django", "rest_framework", "drf_spectacular"}  # and every django_* package
# Folders that hold no project code: tools' environments, runtime state, generated migrations,
# and examples/ (task files whose checkers run inside the sandbox, not in the project).
SKIP_DIRS = {".venv", ".harness", ".runtime", "var", "migrations", "__pycache__", "node_modules", "examples"}
# Imported inside functions on purpose: heavy or optional, kept away from web start-up (STYLE rule 11).
HEAVY_OPTIONAL = {
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "vllm",
    "safetensors",
    "bitsandbytes",
    "deepspeed",
    "tokenizers",
    "huggingface_hub",
    "flash_attn",
    "liger_kernel",
}


@dataclass
class Import:
    source: str  # importing module
    target: str  # imported project module, or the external top-level name
    line: int
    in_function: bool
    project: bool  # target is a project module


@dataclass
class Graph:
    modules: dict[str, Path]  # dotted name -> file
    imports: list[Import] = field(default_factory=list)

    def edges(self, *, with_functions):
        return {(i.source, i.target) for i in self.imports if i.project and (with_functions or not i.in_function)}


def app_of(module):
    return module.split(".", 1)[0]


def find_modules(root):
    """Dotted name -> path for every project .py file below root."""
    modules = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        rel = Path(folder).relative_to(root)
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            parts = [*rel.parts, name[:-3]]
            if parts[-1] == "__init__":
                parts.pop()
            if parts:
                modules[".".join(parts)] = Path(folder) / name
    return modules


def _is_package(modules, name):
    path = modules.get(name)
    return path is not None and path.name == "__init__.py"


def _resolve(modules, name):
    """The deepest project module that `name` names (a.b.attr -> a.b), or None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _walk(statements, in_function=False):
    """Yield (import node, inside a function?) for every import statement in a list of statements.

    Imports are statements, so only statement bodies are visited (not expressions): fast."""
    for node in statements:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function
            continue
        nested = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if block:
                yield from _walk(block, nested)


def module_imports(modules, module, path):
    """The imports of one module, resolved against the project's modules."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if _is_package(modules, module) else module.rpartition(".")[0]
    # A folder without __init__.py (bench/, scripts/) runs as a script with its own folder on sys.path.
    script_dir = "" if (path.parent / "__init__.py").exists() else package
    found = []

    def add(name, node, in_function):
        target = _resolve(modules, name)
        if target is None and script_dir:
            target = _resolve(modules, f"{script_dir}.{name}")
        if target is not None:
            if target != module:
                found.append(Import(module, target, node.lineno, in_function, True))
        else:
            found.append(Import(module, name.split(".")[0], node.lineno, in_function, False))

    for node, in_function in _walk(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, in_function)
            continue
        if node.level:
            base = package.split(".") if package else []
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            base_name = ".".join(base + ([node.module] if node.module else []))
        else:
            base_name = node.module or ""
        for alias in node.names:
            # `from pkg import name`: the submodule pkg.name when there is one, else pkg itself.
            submodule = f"{base_name}.{alias.name}" if base_name else alias.name
            if alias.name != "*" and submodule in modules:
                add(submodule, node, in_function)
            elif base_name:
                add(base_name, node, in_function)
    return found


def build(root):
    root = Path(root)
    graph = Graph(find_modules(root))
    for module, path in graph.modules.items():
        graph.imports.extend(module_imports(graph.modules, module, path))
    return graph


def strongly_connected(nodes, edges):
    """Tarjan's strongly connected components (iterative), each sorted; only those of size > 1."""
    successors = defaultdict(set)
    for a, b in edges:
        successors[a].add(b)
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(successors[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def app_edges(graph, *, with_functions, tests=True):
    return {
        (app_of(a), app_of(b))
        for a, b in graph.edges(with_functions=with_functions)
        if app_of(a) != app_of(b) and (tests or not is_test(a))
    }


def arrows_back_up(apps, edges):
    """The fewest app arrows that point against some order of the apps: the ones to remove for no circle.

    A minimum feedback arc set, computed exactly per circle (a circle holds a handful of apps)."""
    back = []
    for circle in strongly_connected(apps, edges):
        inner = {(a, b) for a, b in edges if a in circle and b in circle}
        position = {app: n for n, app in enumerate(circle)}
        into = [0] * len(circle)  # bit mask of the apps each app imports
        for a, b in inner:
            into[position[a]] |= 1 << position[b]
        # best[mask]: fewest arrows back up when the apps in mask come last, in the best order among them.
        best = {0: (0, ())}
        for mask in range(1, 1 << len(circle)):
            options = []
            for n in range(len(circle)):
                if mask & (1 << n):
                    rest = mask & ~(1 << n)
                    cost, order = best[rest]
                    # n goes first among mask: each arrow into n from the rest points back up.
                    ups = sum(1 for m in range(len(circle)) if rest & (1 << m) and into[m] & (1 << n))
                    options.append((cost + ups, (circle[n], *order)))
            best[mask] = min(options)
        order = best[(1 << len(circle)) - 1][1]
        rank = {app: n for n, app in enumerate(order)}
        back.extend(f"{a} -> {b}" for a, b in sorted(inner) if rank[a] > rank[b])
    return sorted(back)


def is_django(name):
    return name in DJANGO_PACKAGES or name.startswith("django_")


def django_free_lib_modules(graph):
    """The `lib` modules that reach neither Django nor an app through their imports (followed through lib, imports
    inside functions included): the ones a plain library may import."""
    lib = {m for m in graph.modules if app_of(m) == LIBRARY_PACKAGE}
    imports = defaultdict(list)
    for i in graph.imports:
        if i.source in lib:
            imports[i.source].append(i)
    reached = {
        m
        for m in lib
        if any(is_django(i.target) if not i.project else app_of(i.target) != LIBRARY_PACKAGE for i in imports[m])
    }
    grown = True
    while grown:
        grown = False
        for module in sorted(lib - reached):
            if any(i.project and i.target in reached for i in imports[module]):
                reached.add(module)
                grown = True
    return lib - reached


def plain_library_imports(graph):
    """{library: ["module -> what it must not import"]}: Django, an app, or a lib module that reaches either (imports
    inside functions and in tests included)."""
    allowed = django_free_lib_modules(graph)
    found = {}
    for library in PLAIN_LIBRARIES:
        found[library] = sorted(
            {
                f"{i.source} -> {i.target}"
                for i in graph.imports
                if app_of(i.source) == library
                and (is_django(i.target) if not i.project else app_of(i.target) != library and i.target not in allowed)
            }
        )
    return found


def is_test(module):
    parts = module.split(".")
    return "tests" in parts or parts[-1].startswith("test_") or parts[-1] == "conftest"


def long_modules(graph):
    """["path (lines)"] of the modules outside tests, over MAX_MODULE_LINES, in the apps and the libraries."""
    found = []
    for module, path in sorted(graph.modules.items()):
        if is_test(module) or app_of(module) in NOT_MEASURED:
            continue
        with open(path, encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.as_posix()} ({lines})")
    return found


def figures(graph):
    apps = sorted({app_of(m) for m in graph.modules})
    into_settings = [
        i
        for i in graph.imports
        if i.project and app_of(i.target) == SETTINGS_PACKAGE and app_of(i.source) != SETTINGS_PACKAGE
    ]
    from_lib = [
        i
        for i in graph.imports
        if i.project and app_of(i.source) == LIBRARY_PACKAGE and app_of(i.target) != LIBRARY_PACKAGE
    ]
    inside = {"module_level": {}, "with_functions": {}}
    for kind, circles_of in inside.items():
        edges = graph.edges(with_functions=kind == "with_functions")
        for app in apps:
            own = {(a, b) for a, b in edges if app_of(a) == app == app_of(b)}
            circles = strongly_connected({m for m in graph.modules if app_of(m) == app}, own)
            if circles:
                circles_of[app] = circles
    in_functions = defaultdict(lambda: {"code": 0, "code_project": 0, "heavy_optional": 0, "tests": 0})
    for i in graph.imports:
        if i.in_function:
            counts = in_functions[app_of(i.source)]
            if is_test(i.source):
                counts["tests"] += 1
                continue
            counts["code"] += 1
            counts["code_project"] += i.project
            counts["heavy_optional"] += (not i.project) and i.target in HEAVY_OPTIONAL
    between = {}
    # Tests count (a test may import only what its app may); the last figure leaves them out, for what runs in production.
    for kind in ("module_level", "with_functions", "with_functions_outside_tests"):
        edges = app_edges(graph, with_functions=kind != "module_level", tests=kind != "with_functions_outside_tests")
        between[kind] = {"circles": strongly_connected(apps, edges), "arrows_back_up": arrows_back_up(apps, edges)}
    totals = {
        key: sum(c[key] for c in in_functions.values()) for key in ("code", "code_project", "heavy_optional", "tests")
    }
    return {
        "modules": len(graph.modules),
        "into_settings": {
            "files": sorted({graph.modules[i.source].as_posix() for i in into_settings}),
            "code_files": sorted({graph.modules[i.source].as_posix() for i in into_settings if not is_test(i.source)}),
            "imports": len(into_settings),
            "app_arrows": sorted({f"{app_of(i.source)} -> {SETTINGS_PACKAGE}" for i in into_settings}),
        },
        "lib_to_apps": sorted({f"{i.source} -> {i.target}" for i in from_lib}),
        "plain_libraries": plain_library_imports(graph),
        "circles_between_apps": between,
        "circles_inside_apps": inside,
        "imports_in_functions": {**totals, "per_app": {app: in_functions[app] for app in sorted(in_functions)}},
        "long_modules": long_modules(graph),
    }


def print_report(result):
    settings = result["into_settings"]
    print(f"{result['modules']} modules")
    print(
        f"arrows into {SETTINGS_PACKAGE}: {len(settings['app_arrows'])} app arrows, {len(settings['files'])} files"
        f" ({len(settings['code_files'])} outside tests), {settings['imports']} imports"
    )
    for arrow in settings["app_arrows"]:
        print(f"  {arrow}")
    for path in settings["files"]:
        print(f"    {path}")
    print(f"arrows from {LIBRARY_PACKAGE} into apps: {len(result['lib_to_apps'])}")
    for arrow in result["lib_to_apps"]:
        print(f"  {arrow}")
    for library, arrows in result["plain_libraries"].items():
        print(f"imports of Django or an app in the plain library {library}: {len(arrows)}")
        for arrow in arrows:
            print(f"  {arrow}")
    for kind, between in result["circles_between_apps"].items():
        label = kind.replace("_", " ")
        print(f"circles between apps ({label}): {len(between['circles'])}")
        for circle in between["circles"]:
            print(f"  {' <-> '.join(circle)}")
        print(f"  arrows back up ({label}): {len(between['arrows_back_up'])}")
        for arrow in between["arrows_back_up"]:
            print(f"    {arrow}")
    for kind, inside in result["circles_inside_apps"].items():
        print(f"circles inside apps ({kind.replace('_', ' ')}): {sum(len(c) for c in inside.values())}")
        for app, circles in inside.items():
            for circle in circles:
                print(f"  {app}: {' <-> '.join(circle)}")
    print(f"modules of the apps over {MAX_MODULE_LINES} lines, outside tests: {len(result['long_modules'])}")
    for module in result["long_modules"]:
        print(f"  {module}")
    functions = result["imports_in_functions"]
    print(
        f"imports inside functions: {functions['code']} outside tests ({functions['code_project']} of project modules,"
        f" {functions['heavy_optional']} heavy optional, lazy on purpose), {functions['tests']} in tests"
    )
    for app, counts in functions["per_app"].items():
        print(
            f"  {app}: {counts['code']} ({counts['code_project']} project, {counts['heavy_optional']} heavy optional),"
            f" {counts['tests']} in tests"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="project root (default: this checkout)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    result = figures(build(root))
    for key in ("files", "code_files"):
        result["into_settings"][key] = [str(Path(p).relative_to(root)) for p in result["into_settings"][key]]
    result["long_modules"] = [str(Path(m).relative_to(root)) for m in result["long_modules"]]
    print_report(result)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
