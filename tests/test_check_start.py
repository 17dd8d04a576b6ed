"""``kvplan check`` starts without pathlib (its import, with urllib.parse and ipaddress, was ~5 ms of every check):
the paths it names are pathlib's own text, its lookups answer as pathlib's, and the pinned specs of a --specs
directory are found and ordered as ``Path.rglob`` found and ``sorted`` ordered them."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan import safe_io
from kvplan.deploy import _spec_files

WORDS = ["a", "b.yaml", ".", "..", "", "~", "~root", "~nobody-such-user", ".env", "x.", ".yml", "c.tar.gz", "d e"]


def _random_path(rng: random.Random) -> str:
    lead = rng.choice(["", "", "/", "//", "///", "./", "~/"])
    return lead + "/".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4))) + rng.choice(["", "", "/", "//"])


@pytest.mark.skipif(os.name != "posix", reason="elsewhere the helpers are pathlib's own")
def test_path_text_is_pathlibs() -> None:
    rng = random.Random(26)
    for _ in range(5000):
        paths = [_random_path(rng) for _ in range(rng.randint(1, 3))]
        one = paths[0]
        assert safe_io.path_text(*paths) == str(Path(*paths)), paths
        assert safe_io.path_parent(one) == str(Path(one).parent), one
        assert safe_io.path_stem(one) == Path(one).stem, one
        assert safe_io.path_suffix(one) == Path(one).suffix, one
        assert safe_io.path_is_absolute(one) == Path(one).is_absolute(), one
        try:
            expected: object = str(Path(one).expanduser())
        except RuntimeError as exc:
            expected = str(exc)
        try:
            got: object = safe_io.path_expanduser(one)
        except RuntimeError as exc:
            got = str(exc)
        assert got == expected, one


def test_path_lookups_answer_as_pathlibs(tmp_path: Path) -> None:
    (tmp_path / "file.yaml").write_text("a: 1\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    names = ["file.yaml", "dir", "dangling", "loop", "missing", "file.yaml/below", "dir/", "nul\0name", "x" * 300]
    for name in names:
        path = Path(tmp_path, name)
        for ours, theirs in ((safe_io.path_exists, path.exists), (safe_io.path_is_dir, path.is_dir),
                             (safe_io.path_is_file, path.is_file)):
            try:
                expected: object = theirs()
            except OSError as exc:
                expected = type(exc)
            try:
                got: object = ours(safe_io.path_text(tmp_path, name))
            except OSError as exc:
                got = type(exc)
            assert got == expected, (name, ours.__name__)


def test_spec_files_are_rglobs_sorted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ["a.yaml", "a-b.yaml", "a/b.yaml", "a/c.yml", "a-b/z.yaml", ".hidden/h.yaml", "b/.dot.yaml",
                 "b/x.YAML", "b/y.yaml.bak", "c/d/e/f.yml", "c/d.yaml/g.yaml", "plain.txt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("id: x\n")
    (tmp_path / "dir.yaml").mkdir()  # a directory so named: rglob lists it too
    (tmp_path / "link").symlink_to(tmp_path / "a", target_is_directory=True)  # not entered, as rglob
    (tmp_path / "link.yaml").symlink_to(tmp_path / "a.yaml")
    for root in (str(tmp_path), str(tmp_path) + "/", str(tmp_path) + "/./"):
        expected = [str(p) for p in sorted([*Path(root).rglob("*.yaml"), *Path(root).rglob("*.yml")])]
        assert _spec_files(safe_io.path_text(root)) == expected
    monkeypatch.chdir(tmp_path / "c")
    assert _spec_files(".") == [str(p) for p in sorted([*Path(".").rglob("*.yaml"), *Path(".").rglob("*.yml")])]


def test_engines_without_a_server_are_the_registrys_list() -> None:
    """``serving_engines`` (launcher detection, every check) skips ``NO_SERVER`` without importing those packages:
    the list is exactly the registered engines whose ``serve`` is None."""
    from kvplan import engines
    from kvplan.engines.serve import serving_engines

    assert engines.NO_SERVER <= set(engines.ENGINE_NAMES)
    for name in engines.ENGINE_NAMES:
        assert (engines.get_engine(name).serve is None) == (name in engines.NO_SERVER), name
    assert serving_engines() == list(dict.fromkeys(e.serve for e in engines.all_engines() if e.serve is not None))


def test_utf8_text_decoded_as_the_utf8_sig_codec() -> None:
    """``decode_text`` drops the byte-order mark itself (no utf-8-sig codec import): the same text, and the same
    bad-byte offset (counted after the mark), as ``bytes.decode("utf-8-sig")``."""
    from kvplan.errors import ConfigError

    rng = random.Random(8)
    pieces = [b"\xef\xbb\xbf", b"\xef\xbb", b"a", b"\xc3\xa9", b"\xff", b"\xe2\x82", b"\n", b"\x00",
              b"\xf0\x9f\x98\x80"]
    for _ in range(5000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        try:
            expected: object = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            expected = f"x: not UTF-8 text ({exc.reason} at byte {exc.start})"
        try:
            got: object = safe_io.decode_text(raw, "x")
        except ConfigError as exc:
            got = str(exc)
        assert got == expected, raw


def test_yaml_binary_read_and_written_with_base64_deferred() -> None:
    """``yaml_module`` imports PyYAML with base64 and binascii deferred (no ``!!binary`` in a deployment file):
    they stay unimported, and ``!!binary`` reads and writes as PyYAML alone does, good and bad."""
    code = ("import sys\n"
            "import kvplan.safe_io as s\n"
            "y = s.yaml_module() if sys.argv[1] == 'kvplan' else __import__('yaml')\n"
            "out = ['base64' in sys.modules, 'binascii' in sys.modules]\n"
            "for loader in (y.SafeLoader, y.CSafeLoader):\n"
            "    out.append(repr(y.load('a: !!binary aGVsbG8=', Loader=loader)))\n"
            "    try:\n        y.load('a: !!binary ===x', Loader=loader)\n"
            "    except y.YAMLError as exc:\n        out.append(str(exc))\n"
            "out.append(y.safe_dump({'b': b'hi'}))\n"
            "import base64\nout.append(type(base64).__name__)\n"
            "print(out)\n")
    ours = subprocess.run([sys.executable, "-c", code, "kvplan"], capture_output=True, text=True, check=True).stdout
    plain = subprocess.run([sys.executable, "-c", code, "plain"], capture_output=True, text=True, check=True).stdout
    assert ours.startswith("[False, False, ") and plain.startswith("[True, True, ")
    assert ours.split(", ", 2)[2] == plain.split(", ", 2)[2]


@pytest.mark.parametrize("frozen", [True, False])
@pytest.mark.parametrize("kw_only", [False, True])
@pytest.mark.parametrize("post_init", [False, True])
def test_the_shared_init_binds_as_the_standard_one(frozen: bool, kw_only: bool, post_init: bool) -> None:
    """The shared ``__init__``'s short way (``record._bind``, every instance a check makes before its class compiles
    its own) fills the instance as the standard dataclass does: the same values in the same order, a fresh
    factory value, ``__post_init__`` after, and a TypeError for every call the standard one refuses."""
    import dataclasses

    from kvplan import record

    def made(module: object) -> tuple[type, type]:
        seen: list[object] = []

        class Base:
            a: int
            b: str
            c: int = 1
            d: list = module.field(default_factory=list)  # type: ignore[attr-defined]
            e: tuple = ()

            if post_init:
                def __post_init__(self) -> None:
                    seen.append(tuple(vars(self).items()))

        Base.__annotations__ = {"a": "int", "b": "str", "c": "int", "d": "list", "e": "tuple"}
        cls = module.dataclass(frozen=frozen, kw_only=kw_only)(Base)  # type: ignore[attr-defined]
        return cls, type("Plain", (cls,), {})  # a plain subclass: set one by one

    rng = random.Random(int(frozen) * 4 + int(kw_only) * 2 + int(post_init))
    names = ["a", "b", "c", "d", "e", "z"]
    for _ in range(400):
        args = tuple(rng.choice([1, "s", [2], ()]) for _ in range(rng.randint(0, 6)))
        kwargs = {n: rng.choice([3, "t", [4]]) for n in rng.sample(names, rng.randint(0, 4))}
        outcomes = []
        for module in (dataclasses, record):
            for cls in made(module):  # fresh classes: their first instance takes the shared __init__
                try:
                    obj = cls(*args, **kwargs)
                    outcomes.append(list(vars(obj).items()))
                except TypeError:
                    outcomes.append(TypeError)
        assert outcomes[0] == outcomes[1] == outcomes[2] == outcomes[3], (args, kwargs)
        if outcomes[0] is not TypeError and "d" not in kwargs and len(args) < 4:  # d from its factory
            first, second = made(record)[0](*args, **kwargs), made(record)[0](*args, **kwargs)
            assert first.d == [] and first.d is not second.d  # a fresh list each


@pytest.mark.parametrize("extra", [["--specs", "examples/specs/"], ["--specs", "./nope//"],
                                   ["--gpu-catalog", "./nope/x.yaml"], ["--calibration", "nope//c.yaml"]])
def test_path_options_read_as_text_say_what_typers_paths_say(extra: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """check takes its path options as text (``PATHS_AS_TEXT``: no pathlib): named as the Path typer hands over
    is named, so the fast reader and typer's give the same report and the same errors."""
    from conftest import REPO, run_cli

    monkeypatch.chdir(REPO)
    argv = ["check", "examples/pass/kvplan.yaml", "-f", "json", *extra]
    assert run_cli(argv) == run_cli(argv, fast=False)
