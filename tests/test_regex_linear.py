"""Every regular expression kvplan runs over untrusted text works in time linear in the text (issue 23).

Python's ``re`` backtracks: ``(\\d+) GiB`` searched in a line of n digits tries every start inside the
run and rescans it from there, n^2 / 2 steps (a 1 MB line: hours); nested quantifiers over digits are
worse (a 3,000-digit line never ended). Logs, deployment files, flags and Hub ids are anyone's text,
so each pattern kvplan holds is searched in 1 MB lines built to make a backtracking pattern explode.

The patterns are collected three ways, so that a new one cannot slip past: every ``re.Pattern`` that a
kvplan module holds at import, every literal pattern passed to a ``re`` function in the source, and
every pattern ``re`` compiles while kvplan reads the bundled logs and deployment files (patterns built
at run time from parts).
Nothing is timed: a linear search of 1 MB takes milliseconds, a quadratic one hours, and the alarm
only turns a hang into a failure that names the pattern.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import re._parser as sre_parse  # the parser of ``re`` itself (3.11+); sre_parse before
import signal
from pathlib import Path

import pytest

import kvplan

PACKAGE = Path(kvplan.__file__).parent
LINE = 1 << 17  # 128 KiB: a quadratic search of it takes minutes, a linear one a millisecond
HANG_GUARD_S = 20  # per pattern, for all its lines; a linear pattern needs well under a second
# units repeated to 1 MiB: runs of digits, numbers with separators, words, spaces; each line ends in a
# character that no pattern expects there, so that a backtracking pattern must give up on every start
UNITS = ("9", "9 ", "9.", "9,", "9.9 ", " ", "a", "a ", "-", "=", "x9", "[2, ", "GiB ", ": ", "\t", "_9")
REFUSED_MODULES = ("kvplan.__main__",)  # runs the CLI on import
RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}


def _module_patterns() -> dict[tuple[str, int], str]:
    found: dict[tuple[str, int], str] = {}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="kvplan."):
        if info.name in REFUSED_MODULES:
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional dependency (torch) that this machine lacks
            continue
        holders = [module, *(v for v in vars(module).values() if isinstance(v, type) and v.__module__ == info.name)]
        for holder in holders:
            for name, value in vars(holder).items():
                for pattern in _patterns_in(value):
                    found.setdefault((pattern.pattern, pattern.flags), f"{info.name}.{name}")
    return found


def _patterns_in(value: object, depth: int = 0) -> list[re.Pattern]:
    """The patterns a module-level value holds: itself, or inside tables of them (lists, tuples, dicts); a pattern
    compiled on first use (``LazyPattern``, the engines' log readers) is compiled here."""
    from kvplan.engines.log_format import LazyPattern

    if isinstance(value, LazyPattern):
        value = value.compiled()
    if isinstance(value, re.Pattern):
        return [value] if isinstance(value.pattern, str) else []
    if depth < 3 and isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return [p for item in items for p in _patterns_in(item, depth + 1)]
    return []


def _literal_flags(node: ast.expr | None) -> int:
    """re flags written as ``re.I | re.M`` (0 where absent; anything else is evaluated as 0)."""
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
        return int(getattr(re, node.attr, 0))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _literal_flags(node.left) | _literal_flags(node.right)
    return 0


def _source_patterns() -> dict[tuple[str, int], str]:
    found: dict[tuple[str, int], str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                    and node.func.attr in RE_FUNCTIONS and node.args):
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            flag_node = next((k.value for k in node.keywords if k.arg == "flags"), None)
            if flag_node is None:
                at = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2,
                      "split": 3, "sub": 4, "subn": 4}[node.func.attr]
                flag_node = node.args[at] if len(node.args) > at else None
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            found.setdefault((first.value, _literal_flags(flag_node)), where)
    return found


def _runtime_patterns() -> dict[tuple[str, int], str]:
    """What ``re`` compiles while the CLI reads real logs and deployment files (``re._compile`` is where every
    ``re`` function compiles; where a Python lacks it, the two collectors above stand alone)."""
    import contextlib
    import io

    from kvplan.cli import main

    compile_ = getattr(re, "_compile", None)
    if compile_ is None:  # pragma: no cover - CPython 3.10 to 3.14 have it
        return {}
    found: dict[tuple[str, int], str] = {}

    import sys

    here = str(PACKAGE)

    def recording(pattern, flags):
        caller = sys._getframe(1)
        while caller is not None and caller.f_code.co_filename == re.__file__:
            caller = caller.f_back  # past re.compile / re.search to the code that asked
        if isinstance(pattern, str) and caller is not None and caller.f_code.co_filename.startswith(here):
            found.setdefault((pattern, int(flags)), "compiled at run time")  # kvplan's, not a dependency's
        return compile_(pattern, flags)

    data = Path(__file__).parent / "data"
    runs = [["log", str(log), "--compare"] for log in sorted((data / "logs").glob("*.log"))]
    runs += [["check", str(PACKAGE.parent / "examples" / kind), "--specs", str(PACKAGE.parent / "examples" / "specs")]
             for kind in ("pass", "fail", "invalid")]
    re.purge()  # patterns compiled before this would be served from re's cache, unseen
    re._compile = recording  # type: ignore[attr-defined]
    try:
        for argv in runs:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                main(argv)
    finally:
        re._compile = compile_  # type: ignore[attr-defined]
    return found


def _all_patterns() -> dict[tuple[str, int], str]:
    found: dict[tuple[str, int], str] = {}
    for key, where in [*_source_patterns().items(), *_module_patterns().items(), *_runtime_patterns().items()]:
        compiled = re.compile(*key)  # one key for re.compile(p) and the literal p (re adds re.UNICODE)
        found.setdefault((compiled.pattern, compiled.flags), where)
    return found


PATTERNS = sorted(_all_patterns().items(), key=lambda item: item[1])


def test_the_collection_finds_the_patterns():
    # a guard on the guard: the two collectors between them see the log readers' and the parsers' patterns
    assert len(PATTERNS) > 60
    wheres = " ".join(where for _, where in PATTERNS)
    for part in ("engines.vllm.log", "hardware.py", "deploy/", "compiled at run time"):
        assert part in wheres, part


def _witness(items) -> str:
    """A short text that the parsed items match, a character per class (where the walk reaches)."""
    out = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _, body = arg
            out.append(_witness(body) * min(low, 2))
        elif name == "SUBPATTERN":
            out.append(_witness(arg[-1]))
        elif name == "ATOMIC_GROUP":
            out.append(_witness(arg))
        elif name == "BRANCH":
            out.append(_witness(arg[1][0]))
        elif name == "IN":
            first = arg[0]
            kind = str(first[0])
            if kind == "LITERAL":
                out.append(chr(first[1]))
            elif kind == "RANGE":
                out.append(chr(first[1][0]))
            elif kind == "CATEGORY":
                out.append({"CATEGORY_DIGIT": "1", "CATEGORY_SPACE": " "}.get(str(first[1]), "a"))
            else:  # NEGATE and the like
                out.append("a")
        elif name == "ANY":
            out.append("a")
    return "".join(out)


def _prefixes(pattern: str, flags: int) -> list[str]:
    """What the pattern matches up to each of its repeats: the run of a unit placed there makes every
    backtracking choice of that repeat (and those after it) be tried."""
    items = list(sre_parse.parse(pattern, flags))
    found = [""]
    for i in range(len(items)):
        if any(str(op) in ("MAX_REPEAT", "MIN_REPEAT", "SUBPATTERN", "BRANCH") for op, _ in items[i:i + 1]):
            found.append(_witness(items[:i]))
    return list(dict.fromkeys(found))


class _Hang(Exception):
    pass


def _alarm(signum, frame):  # pragma: no cover - only when a pattern hangs
    raise _Hang


@pytest.mark.parametrize("pattern, flags, where", [(p, f, w) for (p, f), w in PATTERNS],
                         ids=[w for _, w in PATTERNS])
def test_pattern_is_linear_on_megabyte_lines(pattern, flags, where):
    compiled = re.compile(pattern, flags)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_GUARD_S)
    unit = prefix = ""
    try:
        for prefix in _prefixes(pattern, flags):
            for unit in UNITS:
                compiled.search(prefix + unit * (LINE // len(unit)) + "\x00")
    except _Hang:
        pytest.fail(f"{where}: {pattern!r} backtracks on a 128 KiB line of {prefix!r} + {unit!r}... "
                    f"(no end in {HANG_GUARD_S} s)")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
