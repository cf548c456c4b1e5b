"""The shape of the house, checked by reading the source: imports go one way (the command-line
modules are leaves that nothing in the library imports), only they print, call `@hydra.main` or
register configs, and no function is too long to check by eye."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from support import ROOT

PACKAGE = ROOT / "nmt"
# The command-line modules (and their shared plumbing, nmt.system.cli): the only ones that may print,
# read Hydra's command line or register the schemas. Nothing else imports them.
CLI_MODULES = {"nmt.train", "nmt.evaluate", "nmt.align", "nmt.explore", "nmt.reference_aligner", "nmt.translate", "nmt.data.__main__",
               "nmt.system.cli"}
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def imported(tree: ast.Module) -> set[str]:
    """The nmt modules a module imports (`from nmt.x import y` counts nmt.x, and nmt.x.y when that is a module)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("nmt"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nmt"):
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules())
    return names & set(modules())


def test_no_library_module_imports_a_command_line_module() -> None:
    offenders = {name: sorted(imported(tree) & CLI_MODULES) for name, tree in modules().items() if name not in CLI_MODULES}
    assert {k: v for k, v in offenders.items() if v} == {}


def calls(tree: ast.Module, name: str) -> list[int]:
    """Lines where `name(...)` or `x.name(...)` is called, or `@x.name` decorates."""
    found = []
    for node in ast.walk(tree):
        target = node.func if isinstance(node, ast.Call) else None
        if isinstance(target, ast.Name) and target.id == name or isinstance(target, ast.Attribute) and target.attr == name:
            found.append(node.lineno)
    return found


def test_only_command_line_modules_print_read_the_command_line_or_register_configs() -> None:
    for name, tree in modules().items():
        if name in CLI_MODULES:
            continue
        assert calls(tree, "print") == [], f"{name} prints"
        assert "hydra.main" not in ast.unparse(tree), f"{name} is a Hydra entry point"
        if name != "nmt.config.commands":  # where it is defined
            assert calls(tree, "register_configs") == [], f"{name} registers configs"


def test_registering_configs_is_never_an_import_side_effect() -> None:
    for name, tree in modules().items():
        top_level = [n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
        assert not [n for n in top_level if "register_configs" in ast.unparse(n)], name


def test_no_function_is_longer_than_it_can_be_read() -> None:
    lengths = {
        f"{name}.{node.name}": node.end_lineno - node.lineno + 1  # type: ignore[operator]
        for name, tree in modules().items() for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    longest = max(lengths, key=lengths.__getitem__)
    assert lengths[longest] < MAX_FUNCTION_LINES, (longest, lengths[longest])


@cache
def imported_modules(name: str) -> frozenset[str]:
    return frozenset(m for m in imported(modules()[name]) if m != name and not name.startswith(m + "."))


def depth(name: str, seen: tuple[str, ...] = (), known: dict[str, int] | None = None) -> int:
    """The longest chain of nmt imports below a module (a cycle is an error)."""
    known = {} if known is None else known
    if name in seen:
        raise AssertionError(f"import cycle: {' -> '.join((*seen, name))}")
    if name not in known:
        known[name] = 1 + max((depth(m, (*seen, name), known) for m in imported_modules(name)), default=0)
    return known[name]


def test_imports_form_no_cycle_and_stay_shallow() -> None:
    # The deepest chain is the layering itself (docs/architecture.md): train -> training.side_by_side ->
    # training.processes -> training.session -> training.loop -> training.metrics -> alignment.export ->
    # alignment.extract -> decoding.splits -> decoding.search -> model.seq2seq -> model.encoder ->
    # attention.self_attention -> attention.modes -> attention.memory.
    depths = {name: depth(name) for name in modules()}
    assert max(depths.values()) <= 15, sorted(depths.items(), key=lambda kv: -kv[1])[:5]


def test_the_top_holds_the_command_lines_and_little_else() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top
    assert {f"nmt.{Path(name).stem}" for name in top} - {"nmt.__init__"} <= CLI_MODULES, top


def _stem(name: str) -> str:
    """A module name without the endings that make near-twins (translate/translation, train/trainer)."""
    for ending in ("ation", "ion", "ing", "er", "or", "e", "s"):
        if name.endswith(ending) and len(name) - len(ending) >= 4:
            return name[: -len(ending)]
    return name


def test_no_two_modules_share_a_name_or_differ_only_by_a_suffix() -> None:
    names = sorted(p.stem for p in PACKAGE.rglob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    stems: dict[str, list[str]] = {}
    for name in names:
        stems.setdefault(_stem(name), []).append(name)
    assert {stem: found for stem, found in stems.items() if len(found) > 1} == {}


def test_no_attention_or_decoder_function_takes_a_deferred_argument() -> None:
    for name in ("nmt.attention.scores", "nmt.attention.block", "nmt.attention.modes", "nmt.model.decoder", "nmt.model.cells"):
        arguments = {a.arg for node in ast.walk(modules()[name]) if isinstance(node, ast.FunctionDef) for a in node.args.args}
        assert not {a for a in arguments if "defer" in a}, name


def test_the_test_oracle_is_not_shipped_in_the_package() -> None:
    assert not (PACKAGE / "model" / "reference.py").exists()
    assert (ROOT / "tests" / "reference_model.py").is_file()


def test_the_readme_layout_names_every_module_and_only_real_files() -> None:
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :].split("```")[1]
    named = {Path(token).name for token in re.findall(r"[\w/]+\.py", layout)}
    modules_on_disk = {p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert modules_on_disk - named == set(), "modules the README's layout does not name"
    everywhere = modules_on_disk | {p.name for p in (ROOT / "tests").glob("*.py")} | {p.name for p in (ROOT / "scripts").rglob("*")}
    assert named - everywhere == set(), "files the README's layout names that do not exist"
