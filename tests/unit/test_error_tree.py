"""The tree of exceptions in the docstring of ``cdif_harvester.errors`` cannot go stale: every
exception class defined anywhere in the package is in it, with its module, under its base class,
and the tree names no class that is gone."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import cdif_harvester
from cdif_harvester import errors

# "    Name (module): ..." for a class of the package; "    Exception" for a built-in root.
_ENTRY = re.compile(r"^(?P<indent> +)(?P<name>[A-Z]\w*)(?: \((?P<module>[\w.]+)\):|$)")


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in the package, by ``module.Name`` (relative)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(cdif_harvester.__path__, "cdif_harvester."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # a script: importing it runs it
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
            ):
                found[f"{_relative(info.name)}.{obj.__name__}"] = obj
    return found


def _relative(module: str) -> str:
    return module.removeprefix("cdif_harvester.")


def _tree() -> dict[str, str]:
    """The docstring's tree: ``module.Name`` (or a built-in's name) -> its parent's."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n", 1)[1]
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, node) of the open ancestors
    for line in block.splitlines():
        match = _ENTRY.match(line)
        if match is None:  # a description's continuation line, or a blank one
            continue
        indent = len(match["indent"])
        node = f"{match['module']}.{match['name']}" if match["module"] else match["name"]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parents[node] = stack[-1][1] if stack else ""
        stack.append((indent, node))
    return parents


def _node(cls: type) -> str:
    if cls.__module__ == "builtins":
        return cls.__name__
    return f"{_relative(cls.__module__)}.{cls.__name__}"


def test_every_exception_of_the_package_is_in_the_tree_under_its_base() -> None:
    defined = _defined_exceptions()
    tree = _tree()
    missing = sorted(set(defined) - set(tree))
    assert not missing, f"add to the tree in errors.py's docstring: {missing}"
    misplaced = {
        name: (tree[name], [_node(base) for base in cls.__bases__])
        for name, cls in defined.items()
        if tree[name] not in {_node(base) for base in cls.__bases__}
    }
    assert not misplaced, f"listed under the wrong parent (listed, actual): {misplaced}"


def test_the_tree_names_no_class_that_is_gone() -> None:
    defined = _defined_exceptions()
    listed = {node for node in _tree() if "." in node}
    assert listed - set(defined) == set()


def test_the_tree_is_read_as_a_tree() -> None:
    # A guard on the parser above: known entries at known places.
    tree = _tree()
    assert tree["errors.HarvestError"] == "Exception"
    assert tree["errors.StorageError"] == "errors.RetryableError"
    assert tree["stages.sources.SourceBusy"] == "errors.PermanentError"
    assert tree["adapters.dlq.NotItsSource"] == "ValueError"
    assert tree["Exception"] == ""
