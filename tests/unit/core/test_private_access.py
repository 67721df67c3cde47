"""trace_scorer touches no private attribute of another package (issue #25 item 1).

A minor release of a dependency may rename what it keeps private (the ``langfuse`` package's
``_client_wrapper`` and ``_response`` were read at start-up once): every module is parsed with ``ast`` and
each ``x._name`` (not a dunder) must be on ``self`` / ``cls``, or a name that a class of this module or of a
trace_scorer module it imports defines (our own dataclasses' private fields), or namedtuple's documented
``_replace`` family. Importing a private module or name of another package fails too. The one exception
is listed with its reason in :data:`ALLOWED`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import trace_scorer

ROOT = Path(trace_scorer.__file__).parent
PACKAGE = "trace_scorer"

#: namedtuple's methods: public API whose names start with an underscore to stay clear of field names.
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})

#: (module, attribute) → why it is allowed.
ALLOWED = {
    ("providers/transport.py", "_init_transport"): (
        "the hook httpx2.AsyncClient builds its transport by; overridden (not read) to wrap the openai SDK's "
        "aiohttp transport, which has no public constructor outside openai._vendor. A rename only stops the "
        "wrapping (errors named as before), which tests/integration/providers/test_transport.py catches"
    ),
    ("providers/transport.py", "_init_proxy_transport"): "the same hook for a proxy",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _class_names(tree: ast.AST) -> set[str]:
    """The private names the classes of a module define: methods, fields, ``self._x = …``."""
    names: set[str] = set()
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node is not cls:
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign | ast.Assign):
                targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
                for target in targets:
                    if isinstance(target, ast.Name):
                        names.add(target.id)
                    elif (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        names.add(target.attr)
    return {name for name in names if _private(name)}


def _own_imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(PACKAGE))
    return found


def violations(source: str, *, module: str, where: str, defined: dict[str, set[str]]) -> list[str]:
    """Each private access to another package's object in ``source``: ``where:line: expression``."""
    tree = ast.parse(source)
    ours = set(defined.get(module, set()))
    for imported in _own_imports(tree):
        ours |= defined.get(imported, set())
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.module.startswith(PACKAGE) and not node.level:
            private = [a.name for a in node.names if _private(a.name)]
            if any(_private(part) for part in node.module.split(".")) or private:
                found.append(
                    f"{where}:{node.lineno}: from {node.module} import {', '.join(a.name for a in node.names)}"
                )
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith(PACKAGE) and any(_private(p) for p in alias.name.split(".")):
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            if node.attr in NAMEDTUPLE_API or node.attr in ours or (where, node.attr) in ALLOWED:
                continue
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def _sources() -> dict[str, tuple[str, str]]:
    """module name → (path below trace_scorer/, source)."""
    return {
        _module_name(path): (path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(ROOT.rglob("*.py"))
    }


def _defined(sources: dict[str, tuple[str, str]]) -> dict[str, set[str]]:
    return {module: _class_names(ast.parse(source)) for module, (_, source) in sources.items()}


def test_no_module_reads_a_private_attribute_of_another_package() -> None:
    sources = _sources()
    defined = _defined(sources)
    found = [
        line
        for module, (where, source) in sources.items()
        for line in violations(source, module=module, where=where, defined=defined)
    ]
    assert found == []


def test_the_allowed_exceptions_are_still_there() -> None:
    """An exception no longer needed is taken off the list (it would hide a new use of that name)."""
    sources = {where: source for where, source in _sources().values()}
    stale = [(where, attr) for where, attr in ALLOWED if f".{attr}" not in sources.get(where, "")]
    assert stale == []


def test_the_check_catches_what_start_up_once_did() -> None:
    """The accesses issue #25 found: the generated client's HTTP client and a raw response."""
    source = (
        "from langfuse.api.core import _internal\n"
        "def send(api, response):\n"
        "    http = api.score_configs.with_raw_response._client_wrapper.httpx_client\n"
        "    return response._response\n"
    )
    found = violations(source, module="trace_scorer.langfuse.x", where="x.py", defined={})
    assert found == [
        "x.py:1: from langfuse.api.core import _internal",
        "x.py:3: api.score_configs.with_raw_response._client_wrapper",
        "x.py:4: response._response",
    ]


def test_private_fields_of_our_own_classes_are_ours_to_read() -> None:
    defined = {"trace_scorer.extract.model": {"_key"}}
    source = "from trace_scorer.extract.model import Msg\ndef key(m: Msg) -> str:\n    return m._key\n"
    assert violations(source, module="trace_scorer.extract.messages", where="m.py", defined=defined) == []
    assert violations(source.replace("extract.model", "sample"), module="m", where="m.py", defined=defined) == [
        "m.py:3: m._key"
    ]
