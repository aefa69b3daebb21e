"""The folder layout is a promise: dependencies point inward (handlers -> stages -> domain).

Read from the source (no import needed): every ``import`` of every module of the package is
checked against the rules of docs/architecture.md, so a shortcut across layers fails here
instead of growing quietly.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "core" / "cdif_harvester"

# What the pure core may import from the package itself.
DOMAIN_MAY_IMPORT = ("cdif_harvester.domain", "cdif_harvester.model", "cdif_harvester.errors")
# What neither the domain nor the stages may import: I/O, SDKs, and the outer layers.
OUTER = (
    "boto3",
    "botocore",
    "httpx",
    "cdif_harvester.adapters",
    "cdif_harvester.aws_runtime",
    "cdif_harvester.local_runtime",
    "cdif_harvester.cli",
    "cdif_harvester.api",
)


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


@pytest.mark.parametrize("path", _modules("domain"), ids=_rel)
def test_the_domain_imports_nothing_outer(path: Path) -> None:
    ours = [name for name in _imports(path) if name.startswith("cdif_harvester")]
    assert [name for name in ours if not _within(name, DOMAIN_MAY_IMPORT)] == []
    assert [name for name in _imports(path) if _within(name, OUTER)] == []


@pytest.mark.parametrize("path", _modules("domain"), ids=_rel)
def test_the_domain_reads_no_environment(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    reads = [
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv"}
    ]
    assert reads == []


@pytest.mark.parametrize("path", _modules("stages"), ids=_rel)
def test_stages_are_written_against_the_ports_only(path: Path) -> None:
    assert [name for name in _imports(path) if _within(name, OUTER)] == []


@pytest.mark.parametrize(
    "name", ["model.py", "ports.py", "wiring.py", "settings.py", "contracts.py"]
)
def test_the_shared_vocabulary_imports_no_adapter(name: str) -> None:
    assert [n for n in _imports(PACKAGE / name) if _within(n, OUTER)] == []


def test_the_report_model_is_pure_and_jinja2_is_imported_lazily() -> None:
    model = _imports(PACKAGE / "report" / "model.py")
    assert [n for n in model if _within(n, (*OUTER, "jinja2"))] == []
    tree = ast.parse((PACKAGE / "report" / "render.py").read_text(encoding="utf-8"))
    top_level = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(
            (alias.name if isinstance(node, ast.Import) else node.module or "").startswith("jinja2")
            for alias in node.names
        )
    ]
    assert top_level == []


def test_every_domain_module_sits_in_a_stage_folder() -> None:
    loose = [p.name for p in (PACKAGE / "domain").glob("*.py") if p.name != "__init__.py"]
    assert loose == [], "a new domain module goes in the folder of the stage it serves"
