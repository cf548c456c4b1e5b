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
# The command-line modules (and their shared plumbing, nmt.cli): the only ones that may print,
# read Hydra's command line or register the schemas. Nothing else imports them.
CLI_MODULES = {"nmt.train", "nmt.evaluate", "nmt.align", "nmt.aligner", "nmt.translate", "nmt.data.__main__", "nmt.cli"}
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
        if name != "nmt.command_config":  # where it is defined
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


def depth(name: str, seen: tuple[str, ...] = ()) -> int:
    """The longest chain of nmt imports below a module."""
    if name in seen:
        raise AssertionError(f"import cycle: {' -> '.join((*seen, name))}")
    below = [depth(m, (*seen, name)) for m in imported(modules()[name]) if m != name and not name.startswith(m + ".")]
    return 1 + max(below, default=0)


def test_imports_form_no_cycle_and_stay_shallow() -> None:
    # The deepest chain is the layering itself (docs/architecture.md): train -> ensemble_training ->
    # trainer -> run_report -> alignment.export -> alignment.extract -> decoding -> search ->
    # model.seq2seq -> model.encoder -> attention.self_attention -> attention.modes -> attention.memory.
    depths = {name: depth(name) for name in modules()}
    assert max(depths.values()) <= 13, sorted(depths.items(), key=lambda kv: -kv[1])[:5]


def test_the_test_oracle_is_not_shipped_in_the_package() -> None:
    assert not (PACKAGE / "model" / "reference.py").exists()
    assert (ROOT / "tests" / "reference_model.py").is_file()


def test_the_readme_layout_names_every_module_and_only_real_files() -> None:
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :].split("```")[1]
    named = {Path(token).name for token in re.findall(r"[\w/]+\.py", layout)}
    modules_on_disk = {p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert modules_on_disk - named == set(), "modules the README's layout does not name"
    everywhere = modules_on_disk | {p.name for p in (ROOT / "tests").glob("*.py")} | {p.name for p in (ROOT / "scripts").glob("*")}
    assert named - everywhere == set(), "files the README's layout names that do not exist"
