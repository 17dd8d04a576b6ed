"""Write ``kvplan/_record_inits.py``: ``python tools/build_record_inits.py`` (``--check`` only compares).

A kvplan record class (``kvplan.record.dataclass``) gets its ``__init__`` at its first instance from the function of
its shape in that module, compiled as any module is (its bytecode cached in ``__pycache__``), instead of binding the
arguments by hand for 127 instances and then compiling its own: the classes a start-up makes ~900 instances of
cost no compile and no binding by hand. The shapes are those of every record class in kvplan's modules (the fields'
names, which have defaults or factories, which are keyword-only, whether the class is frozen or has a
``__post_init__``); the defaults themselves are the class's, set on the function when it is installed.

Run it after adding a record class or changing one's fields: tests/test_record_inits.py fails, naming this script,
when a class's shape is missing or a function is not the text ``record._init_source`` writes for its shape.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import kvplan
from kvplan import record

TARGET = REPO / "kvplan" / "_record_inits.py"
HEADER = '''"""The ``__init__`` of each shape of kvplan's record classes, compiled with this module (its bytecode cached like any
module's): ``kvplan.record`` installs the one of a class's shape at the class's first instance, with the class's own
defaults, factories and name. Written by ``python tools/build_record_inits.py`` from ``record._init_source``; do not
edit (tests/test_record_inits.py holds it to the classes and to that text)."""

# ruff: noqa: F821 - the names a function reads (__object_setattr, __MISSING, __factory_<field>) are the globals
# record._install gives it, the class's own

_D = None  # each default's place: the class's own defaults are set on the function when it is installed
'''


def record_classes() -> tuple[list[type], list[str]]:
    """Every record class defined at the top of a kvplan module (or in a class there), and the modules that could
    not be imported here (an optional dependency missing)."""
    found: dict[str, type] = {}
    names = [info.name for info in pkgutil.walk_packages(kvplan.__path__, "kvplan.")
             if not info.name.endswith("__main__") and info.name != "kvplan._record_inits"]
    skipped = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            skipped.append(f"{name} ({exc})")
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            continue
        stack = list(vars(module).values())
        while stack:
            value = stack.pop()
            if isinstance(value, type) and value.__module__ == module.__name__:
                if "__kvplan_record__" in value.__dict__:
                    found[f"{value.__module__}.{value.__qualname__}"] = value
                stack.extend(v for v in vars(value).values() if isinstance(v, type))
    return [found[name] for name in sorted(found)], skipped


def shapes(classes: list[type]) -> list[str]:
    return sorted({record._shape(cls) for cls in classes})


def render(all_shapes: list[str]) -> str:
    parts = [HEADER]
    for i, shape in enumerate(all_shapes):
        parts.append("\n\n" + record._init_source(shape, f"_{i}"))
    parts.append("\n\nINITS = {\n" + "".join(f"    {shape!r}: _{i},\n" for i, shape in enumerate(all_shapes)) + "}\n")
    return "\n".join(parts[:1]) + "".join(parts[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only: exit 1 where the file differs")
    args = parser.parse_args()
    classes, skipped = record_classes()
    text = render(shapes(classes))
    for name in skipped:
        print(f"not imported (a dependency is missing here): {name}", file=sys.stderr)
    if args.check:
        same = TARGET.exists() and TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET.relative_to(REPO)}: {'up to date' if same else 'DIFFERS: run python tools/build_record_inits.py'}")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(REPO)}: {len(shapes(classes))} shapes of {len(classes)} record classes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
