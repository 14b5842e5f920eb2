"""docs/architecture.md matches the code: its module map, its layers and their exceptions.

Everything here reads source text (``ast``), imports nothing of tfcompress and runs in well
under a second. The page is the source of truth for what it states; these tests fail, naming
the module, when the code and the page part ways, so whoever moves a module updates the page.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "tfcompress"
# An entry the page lists before its module lands (another branch adds it); the test asks
# for the marker to go once the module exists.
PENDING = "(issue 21, being added)"
NAME = re.compile(r"^[A-Za-z_][\w*]*(\.py|/)$")
# Libraries that take seconds to import or have flavours that _compat/ chooses between.
HEAVY = {
    "tensorflow",
    "keras",
    "tf_keras",
    "tensorflow_model_optimization",
    "ai_edge_litert",
    "tflite_runtime",
    "onnx",
    "onnxruntime",
    "tf2onnx",
    "matplotlib",
}
FLAVOURED = {
    "keras",
    "tf_keras",
    "tensorflow_model_optimization",
    "ai_edge_litert",
    "tflite_runtime",
}
# Where the page says a flavoured library is imported directly (its _compat/ rule's exceptions).
FLAVOURED_ALLOWED = (
    "_compat/*",
    "zoo/*",
    "samples/troublemakers.py",
    "samples/gate_models.py",
    "samples/landmarker.py",
    "training/coverage.py",
)


def _block_after(heading: str) -> list[str]:
    """The lines of the first fenced block after ``heading`` on the page."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    fences = [i for i in range(start, len(lines)) if lines[i].startswith("```")]
    return lines[fences[0] + 1 : fences[1]]


def _blocks_after(heading: str) -> list[list[str]]:
    """Every fenced block between ``heading`` and the next ``## `` heading."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    fences = [i for i in range(start, end) if lines[i].startswith("```")]
    return [lines[a + 1 : b] for a, b in zip(fences[::2], fences[1::2], strict=True)]


def module_map() -> dict[str, str]:
    """Every path the module map names (``tfcompress/models/loading.py``) -> its description."""
    listed: dict[str, str] = {}
    folders: list[str] = []
    names: list[str] = []
    for line in _block_after("## Module map"):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= 20:  # a description's continuation
            for name in names:
                listed["".join(folders[:-1] if name.endswith("/") else folders) + name] += line
            continue
        level = indent // 2
        names = []
        for token in line.split():
            if not NAME.match(token):
                break
            names.append(token)
        folders = folders[:level]
        for name in names:
            listed["".join(folders) + name] = line
        if len(names) == 1 and names[0].endswith("/"):
            folders.append(names[0])
    return listed


def real_modules() -> set[str]:
    """Every module and package of tfcompress/ and fuzzing/, as the map writes them."""
    found: set[str] = set()
    for top in ("tfcompress", "fuzzing"):
        for path in (ROOT / top).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py":
                found.add(relative[: -len("__init__.py")])  # the package, as a folder
                if path.parent.name in {"tfcompress", "cli"}:
                    found.add(relative)  # the map describes these two __init__s
            else:
                found.add(relative)
    return found


@functools.cache
def registries() -> list[tuple[str, str]]:
    """(folder, decorator) of every ``Registry(KIND, FOLDER, DECORATOR)`` in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "Registry"
                and len(node.args) >= 3
                and all(isinstance(a, ast.Constant) for a in node.args[:3])
            ):
                found.append((node.args[1].value, node.args[2].value))
    return found


def plugin_files() -> set[str]:
    """The modules a registry finds by the one discovery rule (a line ``@DECORATOR`` in its
    folder): a plug-in is its file and its registration, so it needs no line of its own in
    the map (its folder has one); the map may still describe it."""
    plugins = set()
    for folder, decorator in registries():
        marker = re.compile(rf"^@{decorator}\b", re.MULTILINE)
        for path in (PACKAGE / folder).rglob("*.py"):
            if marker.search(path.read_text(encoding="utf-8")):
                plugins.add(path.relative_to(ROOT).as_posix())
    return plugins


def test_every_registry_finds_its_plugins_in_a_folder_of_the_map():
    folders = {f"tfcompress/{folder}/" for folder, _ in registries()}
    assert len(registries()) >= 7 and folders <= set(module_map()), folders - set(module_map())
    for folder, decorator in registries():
        assert any(p.startswith(f"tfcompress/{folder}/") for p in plugin_files()), decorator


def test_module_map_lists_every_module_and_nothing_else():
    listed = module_map()
    real = real_modules()
    in_scope = {p: line for p, line in listed.items() if p.startswith(("tfcompress/", "fuzzing/"))}
    missing = sorted(real - set(in_scope) - plugin_files())
    assert not missing, f"modules docs/architecture.md's module map does not list: {missing}"
    stale = sorted(p for p, line in in_scope.items() if p not in real and PENDING not in line)
    assert not stale, f"the module map lists modules that do not exist: {stale}"
    landed = sorted(p for p, line in in_scope.items() if p in real and PENDING in line)
    assert not landed, f"these modules exist now: drop {PENDING!r} from their lines: {landed}"
    for top in ("examples/", "benchmarks/", "tests/", "docs/"):
        assert top in listed and (ROOT / top).is_dir()


@dataclass(frozen=True)
class Import:
    """One ``import`` of a tfcompress module, seen in the source."""

    path: str  # importing file, relative to tfcompress/ ("bench/artifacts.py")
    target: str  # imported module ("tfcompress.targets.onnx.export")
    when: str  # "module" (runs on import), "function" (lazy) or "typing" (never runs)


def _resolve(path: Path, node: ast.ImportFrom) -> list[str]:
    if node.level:
        package = path.relative_to(ROOT).with_suffix("").parts[: -node.level]
        base = ".".join(package)
        return [f"{base}.{node.module}" if node.module else base]
    if node.module == "tfcompress":  # from tfcompress import quantization / __version__
        return [
            f"tfcompress.{alias.name}"
            if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file()
            else "tfcompress"
            for alias in node.names
        ]
    return [node.module or ""]


@functools.cache
def imports(path: Path) -> list[tuple[str, str]]:
    """(imported module, when) for every import statement of one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    when: dict[int, str] = {}

    def mark(body: list[ast.stmt], kind: str) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for inner in ast.walk(node):
                    when[id(inner)] = "typing"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                when[id(node)] = kind
            elif isinstance(node, (ast.If, ast.Try)):
                for part in (node.body, node.orelse, getattr(node, "finalbody", [])):
                    mark(part, kind)
                for handler in getattr(node, "handlers", []):
                    mark(handler.body, kind)

    mark(tree.body, "module")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            targets = _resolve(path, node)
        else:
            continue
        found += [(target, when.get(id(node), "function")) for target in targets]
    return found


@functools.cache
def tfcompress_imports() -> list[Import]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for target, when in imports(path):
            if target == "tfcompress" or target.startswith("tfcompress."):
                found.append(Import(relative, target, when))
    return found


def layers() -> dict[str, int]:
    """The layer table: ``"bench/"`` -> 5, ``"__init__.py"`` -> 10, ..."""
    table = _blocks_after("## Layers: what may import what")[0]
    assert table[0].startswith("layer"), "the first block of ## Layers is the layer table"
    return {unit: int(row.split()[0]) for row in table[1:] for unit in row.split()[1:]}


def exceptions() -> list[tuple[str, str]]:
    """The listed upward function-level imports: (importing module glob, unit reached)."""
    table = _blocks_after("## Layers: what may import what")[1]
    assert table[0].startswith("module"), "the second block of ## Layers lists the exceptions"
    return [(row.split()[0], row.split()[1]) for row in table[1:]]


def unit_of(module: str, known: dict[str, int]) -> str:
    """The layer table's name for a module: the longest listed folder that holds it."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    for size in range(len(parts), 0, -1):
        folder = "/".join(parts[:size]) + "/"
        if folder in known:
            return folder
    name = parts[0] + ".py"
    assert name in known, f"{module} is on no layer of docs/architecture.md"
    return name


def test_module_level_imports_only_reach_down_a_layer():
    known = layers()
    upward = []
    for found in tfcompress_imports():
        if found.when != "module":
            continue
        here = unit_of("tfcompress." + found.path.removesuffix(".py").replace("/", "."), known)
        there = unit_of(found.target, known)
        if here != there and known[there] >= known[here]:
            upward.append(f"{found.path} imports {found.target} ({here} -> {there})")
    assert not upward, "module-level imports against docs/architecture.md's layers:\n" + "\n".join(
        upward
    )


def test_function_level_imports_reach_up_only_where_the_page_says():
    known = layers()
    allowed = exceptions()
    used = set()
    upward = []
    for found in tfcompress_imports():
        if found.when != "function":
            continue
        here = unit_of("tfcompress." + found.path.removesuffix(".py").replace("/", "."), known)
        there = unit_of(found.target, known)
        if here == there or known[there] < known[here]:
            continue
        match = [
            (glob, unit)
            for glob, unit in allowed
            if fnmatch.fnmatch(found.path, glob) and unit == there
        ]
        if match:
            used.update(match)
        else:
            upward.append(f"{found.path} imports {found.target} ({here} -> {there})")
    assert not upward, "upward imports docs/architecture.md does not list:\n" + "\n".join(upward)
    assert used == set(allowed), f"listed exceptions no code needs: {sorted(set(allowed) - used)}"


def test_measure_report_and_gates_never_import_a_transform_but_the_named_one():
    transforms = (
        "tfcompress.quantization",
        "tfcompress.training",
        "tfcompress.compression",
        "tfcompress.targets.onnx",
    )
    readers = ("runtime/", "bench/", "report/", "testing/")
    found = [
        f"{i.path} -> {i.target}"
        for i in tfcompress_imports()
        if i.path.startswith(readers) and i.when != "typing" and i.target.startswith(transforms)
    ]
    assert found == ["bench/artifacts.py -> tfcompress.targets.onnx"], found


def test_heavy_libraries_load_inside_functions_and_flavours_through_compat():
    module_level, flavoured = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for target, when in imports(path):
            top = target.split(".")[0]
            if top in HEAVY and when == "module" and relative != "zoo/layers.py":
                module_level.append(f"{relative}: {target}")
            if top in FLAVOURED and not any(
                fnmatch.fnmatch(relative, g) for g in FLAVOURED_ALLOWED
            ):
                flavoured.append(f"{relative}: {target}")
    assert not module_level, f"heavy imports at module level: {module_level}"
    assert not flavoured, f"flavoured libraries imported outside _compat/: {flavoured}"
    # zoo/layers.py is the one module-level Keras import: the zoo loads it on first use only.
    zoo_init = [t for t, when in imports(PACKAGE / "zoo" / "__init__.py") if when == "module"]
    assert "tfcompress.zoo.layers" not in zoo_init


def test_nothing_in_the_package_imports_the_tools_around_it():
    outside = ("fuzzing", "benchmarks", "examples", "tests")
    for path in sorted(PACKAGE.rglob("*.py")):
        for target, _ in imports(path):
            assert target.split(".")[0] not in outside, f"{path} imports {target}"


def _size_line(label: str) -> str:
    """The text after ``- label:`` in the page's "## Size" list, continuation lines joined."""
    items = " ".join(line.strip() for line in _section("## Size")).split("- ")
    return next(item[len(label) + 1 :] for item in items if item.startswith(f"{label}:"))


def _section(heading: str) -> list[str]:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start + 1 : end]


def test_the_library_stays_under_the_line_count_the_page_states():
    bound = int(
        re.search(r"at most ([\d,]+)", _size_line("library lines")).group(1).replace(",", "")
    )
    lines = sum(p.read_bytes().count(b"\n") for p in PACKAGE.rglob("*.py"))
    assert lines <= bound, f"tfcompress/ has {lines:,} lines, over the {bound:,} the page states"


def test_files_over_600_lines_are_the_ones_the_page_names():
    stated = _size_line("files over 600 lines").split(" (")[0]
    named = set() if stated.strip() == "none" else {n.strip() for n in stated.split(",")}
    over = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.read_bytes().count(b"\n") > 600
    }
    assert over == named, f"over 600 lines: {sorted(over)}; the page names {sorted(named)}"
