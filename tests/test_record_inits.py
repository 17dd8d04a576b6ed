"""kvplan's record classes get the ``__init__`` of their shape compiled ahead (``kvplan/_record_inits.py``, written
by tools/build_record_inits.py): every class has its shape there, and every function there is the code
``record._init_source`` writes for its shape (the code a class would otherwise compile for itself, whose behaviour
tests/test_record.py holds to dataclasses')."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kvplan import _record_inits, record

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from build_record_inits import record_classes

FIX = "run python tools/build_record_inits.py"


def _code_parts(code: object) -> tuple[object, ...]:
    """What a code object does (not where its text stood, nor the compiler's future flags, which an ``exec`` takes
    from its caller): its instructions, names, constants and arguments."""
    return tuple(getattr(code, name) for name in ("co_code", "co_consts", "co_names", "co_varnames", "co_argcount",
                                                  "co_kwonlyargcount", "co_posonlyargcount"))


def test_every_record_class_has_its_shape_shipped() -> None:
    classes, _ = record_classes()
    assert len(classes) > 100
    missing = sorted({f"{cls.__module__}.{cls.__qualname__}: {record._shape(cls)}" for cls in classes
                      if record._shape(cls) not in _record_inits.INITS})
    assert not missing, f"shapes not in kvplan/_record_inits.py ({FIX}):\n" + "\n".join(missing)


def test_every_shipped_function_is_the_text_of_its_shape() -> None:
    assert list(_record_inits.INITS) == sorted(set(_record_inits.INITS))  # one each, in order
    for shape, function in _record_inits.INITS.items():
        namespace: dict[str, object] = {"_D": None}
        exec(record._init_source(shape), namespace)  # noqa: S102 - the text the class would compile
        made = namespace["__init__"].__code__  # type: ignore[attr-defined]
        assert _code_parts(function.__code__) == _code_parts(made), f"{shape}: {FIX}"


def test_a_class_gets_its_shipped_init_at_its_first_instance() -> None:
    """In a fresh interpreter: no binding by hand, no compile, and the class's own name in its errors."""
    code = ("from kvplan.deploy.flags import Token\n"
            "import kvplan.record as r\n"
            "t = Token('a', shell=True)\n"
            "assert (t.text, t.line, t.shell) == ('a', None, True)\n"
            "assert Token.__init__ is not r._lazy_init and '__kvplan_bind__' not in Token.__dict__\n"
            "assert Token.__init__.__qualname__ == 'Token.__init__'\n"
            "assert Token.__init__.__code__.co_filename == '<kvplan.record Token.__init__>'\n"
            "try:\n    Token()\nexcept TypeError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          check=True)
    assert "Token.__init__()" in done.stdout and "'text'" in done.stdout


def test_a_shape_kvplan_lacks_binds_then_compiles() -> None:
    @record.dataclass(frozen=True)
    class Odd:
        a_field_no_kvplan_class_has: int
        another_one: str = "x"

    assert record._shape(Odd) not in _record_inits.INITS
    made = [Odd(i) for i in range(record._COMPILE_AT + 1)]
    assert made[0] == Odd(0, "x") and made[-1].a_field_no_kvplan_class_has == record._COMPILE_AT
    assert Odd.__init__ is not record._lazy_init  # compiled at the COMPILE_AT-th instance
