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
    pieces = [b"\xef\xbb\xbf", b"\xef\xbb", b"a", b"\xc3\xa9", b"\xff", b"\xe2\x82", b"\n", b"\x00", b"\xf0\x9f\x98\x80"]
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
