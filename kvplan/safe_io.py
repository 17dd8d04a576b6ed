"""Bounded reading of untrusted input: files, JSON and YAML, each with a cap on size, depth and work.

Every file kvplan reads from a user (config.json, YAML specs, deployment files, GPU catalogs, a
``.env``) and every JSON text the Hub sends goes through here, so that no input can block, fill the
memory or crash the interpreter. The limits, and what breaks without them:

- a file must be a regular file (a named pipe blocks, ``/dev/zero`` never ends) of at most
  :data:`MAX_FILE_BYTES`;
- text must be UTF-8 (a byte-order mark is allowed);
- JSON and YAML may nest at most :data:`MAX_DEPTH` levels (CPython's JSON decoder raises
  ``RecursionError`` near 1,000; libyaml's composer recurses in C and crashes the process on
  200,000 nested ``[``);
- YAML aliases may add at most :data:`MAX_ALIAS_NODES` nodes when expanded, and may not refer to
  themselves (a "billion laughs" file is 1 KB and expands to 10^9 nodes);
- an integer may have at most as many digits as Python converts (``sys.get_int_max_str_digits()``,
  4,300 by default: CPython refuses longer ones with a ``ValueError``).

Each failure is a one-line :class:`~kvplan.errors.ConfigError` naming the input.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True

import os
import stat
import sys
import types

from kvplan.errors import ConfigError

if TYPE_CHECKING:
    from typing import Any
    from collections.abc import Iterator

MAX_FILE_BYTES = 16 * 1024 * 1024  # far above any config.json (< 1 MB) or manifest kvplan reads
MAX_DEPTH = 128  # Kubernetes manifests nest ~15 levels, configs ~5
MAX_ALIAS_NODES = 100_000  # what anchors/aliases may add; compose files reuse blocks of tens of nodes


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB"


def max_int_digits() -> int:
    """The longest integer (in decimal digits) Python converts; 0 means unlimited (Python < 3.11)."""
    getter = getattr(sys, "get_int_max_str_digits", None)
    return int(getter()) if getter is not None else 0


# ------------------------------------------------------------------------------------------------
# Files


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_bytes(path: str | os.PathLike, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The content of regular file ``path``, at most ``limit`` bytes; anything else is a ConfigError.

    The file is opened non-blocking so that a named pipe without a writer cannot hang the open,
    then checked with ``fstat`` (no race between the check and the read).
    """
    return _read_regular(path, limit, cut=False)[0]


def read_head(path: str | os.PathLike, *, limit: int) -> tuple[bytes, int]:
    """(at most ``limit + 1`` bytes from the start of regular file ``path``, its size): for a log, whose start is
    what is read, a longer file is cut, not refused (one byte more than ``limit`` says that there was more: a
    growing file's size can lie). Opened as :func:`read_bytes` opens (non-blocking, regular files only)."""
    return _read_regular(path, limit, cut=True)


def _read_regular(path: str | os.PathLike, limit: int, *, cut: bool) -> tuple[bytes, int]:
    """(up to ``limit + 1`` bytes of regular file ``path``, its size); past ``limit`` refused unless ``cut``."""
    where = os.fspath(path)
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
            raise ConfigError(f"{where}: {kind}: kvplan reads only regular files")
        if not cut and info.st_size > limit:
            raise ConfigError(f"{where}: {info.st_size:,} bytes, more than the {_mib(limit)} kvplan reads "
                              "from one file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # st_size can lie (a file still growing, /proc): read no more than limit + 1
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if not cut and size > limit:
            raise ConfigError(f"{where}: more than the {_mib(limit)} kvplan reads from one file")
        return b"".join(chunks), max(info.st_size, size)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def decode_text(raw: bytes, where: str) -> str:
    """UTF-8 text (a leading byte-order mark is dropped); anything else names the first bad byte."""
    if raw[:3] == b"\xef\xbb\xbf":  # the utf-8-sig codec's own step (its bad-byte offsets count after the mark),
        raw = raw[3:]  # without importing that codec on every check
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_text(path: str | os.PathLike, *, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of regular file ``path`` (at most ``limit`` bytes)."""
    return decode_text(read_bytes(path, limit=limit), os.fspath(path))


# ------------------------------------------------------------------------------------------------
# Paths as pathlib names them, without pathlib: its import (with urllib.parse and ipaddress) is ~5 ms of every
# `kvplan check`. On POSIX these give pathlib's exact text (tests/test_check_start.py compares them);
# elsewhere they are pathlib's own.


def _pure_parts(paths: tuple[str | os.PathLike, ...]) -> tuple[str, list[str]]:
    """(root, parts) of ``PurePosixPath(*paths)``: an absolute part starts over; '' and '.' parts are dropped;
    exactly two leading slashes are a root of their own (POSIX leaves their meaning to the system)."""
    root, parts = "", []
    for item in paths:
        text = os.fspath(item)
        if text.startswith("/"):
            root, parts = ("//" if text.startswith("//") and not text.startswith("///") else "/"), []
        parts += [part for part in text.split("/") if part and part != "."]
    return root, parts


def path_text(*paths: str | os.PathLike) -> str:
    """``str(Path(*paths))``: the paths joined and named as pathlib names them."""
    if os.name != "posix":
        from pathlib import Path

        return str(Path(*paths))
    root, parts = _pure_parts(paths)
    return root + "/".join(parts) or "."


def path_parent(path: str | os.PathLike) -> str:
    """``str(Path(path).parent)``."""
    if os.name != "posix":
        from pathlib import Path

        return str(Path(path).parent)
    root, parts = _pure_parts((path,))
    return root + "/".join(parts[:-1]) or "."


def path_stem(path: str | os.PathLike) -> str:
    """``Path(path).stem``: the last part less its last suffix."""
    if os.name != "posix":
        from pathlib import Path

        return Path(path).stem
    name, dot = _name_and_dot(path)
    return name[:dot] if dot else name


def path_suffix(path: str | os.PathLike) -> str:
    """``Path(path).suffix``: the last part's last suffix ('.yaml'), or ''."""
    if os.name != "posix":
        from pathlib import Path

        return Path(path).suffix
    name, dot = _name_and_dot(path)
    return name[dot:] if dot else ""


def _name_and_dot(path: str | os.PathLike) -> tuple[str, int]:
    """The last part, and where its suffix starts (0: none; a leading or final dot starts none)."""
    parts = _pure_parts((path,))[1]
    name = parts[-1] if parts else ""
    dot = name.rfind(".")
    return name, dot if 0 < dot < len(name) - 1 else 0


def path_expanduser(path: str | os.PathLike) -> str:
    """``str(Path(path).expanduser())``: a leading ``~`` or ``~user`` part made the home directory."""
    if os.name != "posix":
        from pathlib import Path

        return str(Path(path).expanduser())
    root, parts = _pure_parts((path,))
    if not root and parts and parts[0][:1] == "~":
        home = os.path.expanduser(parts[0])
        if home[:1] == "~":
            raise RuntimeError("Could not determine home directory.")  # pathlib's error, in its words
        return path_text(home, *parts[1:])
    return root + "/".join(parts) or "."


def path_is_absolute(path: str | os.PathLike) -> bool:
    """``Path(path).is_absolute()``."""
    if os.name != "posix":
        from pathlib import Path

        return Path(path).is_absolute()
    return os.fspath(path).startswith("/")


def _path_stat(path: str) -> os.stat_result | None:
    """``os.stat(path)`` as pathlib's ``exists``/``is_dir``/``is_file`` look: None where it is missing (or a
    dangling link, a loop, a file where a directory is named, a NUL in the name); any other failure to look (no
    permission) raises, as there. ``path`` is named as pathlib names it (``path_text``)."""
    try:
        return os.stat(path)
    except OSError as exc:
        import errno  # built in: no file to read

        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP) and \
                getattr(exc, "winerror", None) not in (21, 123, 1921):  # pathlib's ignored errors
            raise
        return None
    except ValueError:
        return None


def path_exists(path: str) -> bool:
    """``Path(path).exists()``."""
    return _path_stat(path) is not None


def path_is_dir(path: str) -> bool:
    """``Path(path).is_dir()``."""
    found = _path_stat(path)
    return found is not None and stat.S_ISDIR(found.st_mode)


def path_is_file(path: str) -> bool:
    """``Path(path).is_file()``."""
    found = _path_stat(path)
    return found is not None and stat.S_ISREG(found.st_mode)


# ------------------------------------------------------------------------------------------------
# JSON


def _line_col(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"{line}:{col}"


def _depth_of(data: Any) -> int:
    """How deeply lists and dicts nest in ``data`` (iterative: the data may be deep)."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(text: str, where: str) -> Any:
    """JSON ``text`` with bounded depth and integer size; malformed JSON names line:column."""
    import json
    import re

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        ends_early = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated")
        more = " (the file ends early: truncated?)" if ends_early else ""
        raise ConfigError(f"{where}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}{more}") from None
    except RecursionError:
        raise ConfigError(f"{where}: invalid JSON: nested more than {MAX_DEPTH} levels deep") from None
    except ValueError:  # CPython refuses to convert integers of more than sys.get_int_max_str_digits() digits
        digits = max_int_digits()
        found = re.search(r"\d{%d,}" % (digits + 1), text) if digits else None
        at = f":{_line_col(text, found.start())}" if found else ""
        raise ConfigError(f"{where}{at}: invalid JSON: an integer of more than {digits:,} digits") from None
    if _depth_of(data) > MAX_DEPTH:
        raise ConfigError(f"{where}: invalid JSON: nested more than {MAX_DEPTH} levels deep")
    return data


def json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def parse_json_object(text: str, where: str) -> dict:
    """A JSON object from ``text`` (see :func:`parse_json`)."""
    data = parse_json(text, where)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {json_kind(data)}")
    return data


def read_json_object(path: str | os.PathLike) -> dict:
    """A JSON object from regular file ``path``."""
    return parse_json_object(read_text(path), os.fspath(path))


# ------------------------------------------------------------------------------------------------
# YAML


class YamlInputError(ConfigError):
    """Malformed or unbounded YAML: carries the 1-based line of the problem (None where unknown)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class _DeferredPattern:
    """A regular expression PyYAML compiles at import, compiled when first used: ``import yaml`` compiles some 20
    patterns (about 17 ms on this machine, 12 of them for the pure-Python reader's NON_PRINTABLE, which the C
    loader never reads), most of which a run never matches. Its methods are the compiled pattern's once read."""

    def __init__(self, compile_now: Any, pattern: Any, flags: int) -> None:
        self._compile_args = (compile_now, pattern, flags)

    def __getattr__(self, name: str) -> Any:  # reached only before the first use
        if name.startswith("__"):  # copy, pickle and friends probe for these: not a pattern's
            raise AttributeError(name)
        compiled = self.__dict__.get("_compiled")
        if compiled is None:
            compile_now, pattern, flags = self.__dict__["_compile_args"]
            compiled = self.__dict__["_compiled"] = compile_now(pattern, flags)
            for method in ("match", "search", "fullmatch", "finditer", "findall", "sub", "subn", "split"):
                setattr(self, method, getattr(compiled, method))  # later calls skip __getattr__
        return getattr(compiled, name)


class _DeferredModule(types.ModuleType):
    """What PyYAML's constructor and representer see as ``base64`` and ``binascii`` (``!!binary`` only): the real
    module is imported when a name of it is first read (its names then copied here). With struct, that import is
    ~1 ms of every check that reads YAML, and kvplan's files hold no ``!!binary``."""

    def __getattr__(self, name: str) -> Any:  # reached only before the first use
        real = sys.modules.get(self.__name__)
        if real is None or real is self:
            sys.modules.pop(self.__name__, None)
            __import__(self.__name__)
            real = sys.modules[self.__name__]
        vars(self).update({k: v for k, v in vars(real).items() if not k.startswith("__")})
        return getattr(real, name)


def yaml_module() -> Any:
    """PyYAML (``import yaml``), its import's regular expressions compiled on first use (``_DeferredPattern``) and
    its ``base64`` and ``binascii`` imported on first use (``_DeferredModule``). Only PyYAML's own modules get
    these, and only while it is first imported; a yaml imported before is returned as it is."""
    found = sys.modules.get("yaml")
    if found is not None:
        return found
    import re

    compile_now = re.compile

    def deferred(pattern: Any, flags: int = 0) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "yaml" or caller.startswith("yaml."):
            return _DeferredPattern(compile_now, pattern, flags)
        return compile_now(pattern, flags)

    stand_ins = {name: _DeferredModule(name) for name in ("base64", "binascii") if name not in sys.modules}
    sys.modules.update(stand_ins)
    re.compile = deferred  # type: ignore[assignment]
    try:
        import yaml
    finally:
        re.compile = compile_now
        for name, stand_in in stand_ins.items():  # whoever imports them next gets the real modules
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
    return yaml


_LOADER: Any = None


def yaml_loader_class() -> Any:
    """PyYAML's safe loader (libyaml's where installed) whose tag resolution of a plain scalar is remembered by
    value: resolving is a pure function of (kind, value, implicit) for the safe loader (no path resolvers), and
    a fleet of manifests repeats the same keys and values (``resolve`` was ~10 % of reading a file)."""
    global _LOADER
    if _LOADER is None:
        yaml = yaml_module()
        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        memo: dict[tuple[Any, ...], str] = {}
        collection_tags: dict[tuple[Any, ...], str] = {}  # (kind, None, implicit): a handful
        scalar_node = yaml.ScalarNode

        plain_tag = _plain_tag if _standard_resolvers(base) else None

        class Loader(base):  # type: ignore[misc, valid-type]
            if not base.yaml_path_resolvers:  # none (PyYAML adds them to the safe loaders only when told to)
                # the composer calls these two for every node, and PyYAML's own return at once without path
                # resolvers: C calls that do as little (the node, index -> index; 0), not a Python frame each
                descend_resolver = {}.get
                ascend_resolver = ().__len__

            def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
                if kind is not scalar_node:
                    if self.yaml_path_resolvers:
                        return super().resolve(kind, value, implicit)
                    # a mapping or sequence: without path resolvers, the kind's default tag (or the explicit one)
                    kind_key = (kind, value, implicit)
                    tag = collection_tags.get(kind_key)
                    if tag is None:
                        tag = collection_tags[kind_key] = super().resolve(kind, value, implicit)
                    return tag
                if type(value) is not str or self.yaml_path_resolvers:
                    return super().resolve(kind, value, implicit)
                key = (value, implicit)
                tag = memo.get(key)
                if tag is None:
                    if len(memo) >= 50_000:  # bounded: a fleet's distinct scalars, not a huge file's
                        memo.clear()
                    tag = None
                    if plain_tag is not None:  # PyYAML's own resolvers: a quoted (or '!') scalar gets the default
                        tag = plain_tag(value) if implicit[0] else self.DEFAULT_SCALAR_TAG
                    if tag is None:
                        tag = super().resolve(kind, value, implicit)
                    memo[key] = tag
                return tag

        _LOADER = Loader
    return _LOADER


_TAG = "tag:yaml.org,2002:"
_RESOLVERS = {"": ("null",), "!": ("yaml",), "&": ("yaml",), "*": ("yaml",), "+": ("float", "int"),
              "-": ("float", "int"), ".": ("float",), "<": ("merge",), "=": ("value",), "~": ("null",),
              **{c: ("float", "int", "timestamp") for c in "0123456789"},
              **{c: ("bool",) for c in "yYtTfFoO"}, "n": ("bool", "null"), "N": ("bool", "null")}
"""PyYAML's implicit resolvers of the safe loader, by first character: the tags tried, in order."""
_BOOLS = frozenset("yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF".split())
_NULLS = frozenset(("~", "null", "Null", "NULL", ""))


def _standard_resolvers(loader: Any) -> bool:
    """True where ``loader``'s implicit resolvers are PyYAML's own (``_RESOLVERS``): nothing added or removed."""
    table = loader.yaml_implicit_resolvers
    return None not in table and set(table) == set(_RESOLVERS) and all(
        tuple(tag.removeprefix(_TAG) for tag, _ in table[c]) == tags for c, tags in _RESOLVERS.items())


def _plain_tag(value: str) -> str | None:
    """The tag PyYAML's safe resolver gives the plain scalar ``value``, where its shape alone decides it without
    a regular expression (None: ask the resolver). Resolving compiled 5 of PyYAML's patterns in every check (~4 ms
    of its start); what this answers is what those patterns answer (tests/test_yaml_plain_tags.py holds it to them):
    - a word that starts as a bool or null may (``yes``, ``null``: their patterns are alternatives of literals,
      ``$`` also before one final newline); any other word starting with those letters is a string;
    - ASCII digits alone: an int where the int pattern takes them (``0``, no leading 0, or an octal ``0[0-7]+``), else
      a string (float and timestamp need a ``.``, ``:`` or ``-``); digits, one ``.``, digits: a float;
    - a scalar starting as a number may (a digit, ``-``, ``+``, ``.``) with a character no number or timestamp holds
      (``8k``, ``32Gi``), or ``-``/``+`` followed by neither a digit nor ``.``: a string;
    - a scalar whose first character starts none of the resolver's patterns (``vllm``, ``H100``): a string, the
      resolver's default."""
    first = value[:1]
    if first in _BOOL_FIRST:
        word = value[:-1] if value.endswith("\n") else value
        if word in _BOOLS:
            return _TAG + "bool"
        if first in "nN~" and word in _NULLS:
            return _TAG + "null"
        return _TAG + "str"
    if value == "":
        return _TAG + "null"
    if first in "0123456789" and value.isascii():
        if value.isdigit():
            if first != "0" or not value.strip("01234567"):  # 0, 17, 0755: ints; 08 and 0789: strings
                return _TAG + "int"
            return _TAG + "str"
        whole, dot, fraction = value.partition(".")
        if dot and whole.isdigit() and (fraction == "" or fraction.isdigit()):
            return _TAG + "float"
    if first in "0123456789-+.":  # only the float, int and timestamp patterns start here
        if not _NUMBER_CHARS.issuperset(value):
            return _TAG + "str"
        if first in "-+" and (len(value) == 1 or value[1] not in "0123456789."):
            return _TAG + "str"
    if first not in _RESOLVERS:  # no pattern of the safe resolver starts with it (``vllm``, ``H100``): its default
        return _TAG + "str"
    return None


_NUMBER_CHARS = frozenset("0123456789_.+-:eEbxabcdefABCDEFTtZinINA \t\n")
"""Every character the float, int and timestamp patterns can match (hex digits, ``0b``/``0x``, ``.inf``/``.nan``,
a timestamp's ``T``, blanks and ``Z``, ``$``'s final newline): a scalar with any other (``8k``, ``32Gi``, ``10%``)
matches none of them."""


_BOOL_FIRST = frozenset("yYnNtTfFoO~")


def _yaml_error(exc: Exception, where: str) -> YamlInputError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["?"])[0]
    at = f" line {line}, column {mark.column + 1}" if mark is not None else ""
    return YamlInputError(f"{where}:{at}: malformed YAML: {problem}", line)


def check_yaml_events(text: str, where: str) -> None:
    """Refuse YAML that nests too deeply, expands too far through aliases, or refers to itself.

    One pass over libyaml's parse events (flat, no recursion), before anything is composed: the
    composer would recurse once per level. Each anchor's expanded size is known when its node
    ends; an alias adds that size (and that depth) where it stands.
    """
    yaml = yaml_module()

    loader = yaml_loader_class()(text)
    digits = max_int_digits()
    # one frame per open collection: [expanded nodes so far, deepest depth below, anchor or None]
    stack: list[list[Any]] = []
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, depth of its node)
    open_anchors: set[str] = set()
    added = 0  # nodes added by aliases, over the whole stream

    def close(nodes: int, depth: int, anchor: str | None) -> None:
        if anchor is not None:
            anchors[anchor] = (nodes, depth)
            open_anchors.discard(anchor)
        if stack:
            stack[-1][0] += nodes
            stack[-1][1] = max(stack[-1][1], depth + 1)

    try:
        while loader.check_event():
            event = loader.get_event()
            line = event.start_mark.line + 1 if event.start_mark is not None else None
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise YamlInputError(f"{where}: line {line}: YAML nested more than {MAX_DEPTH} levels deep", line)
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
                stack.append([1, 0, event.anchor])
            elif isinstance(event, yaml.CollectionEndEvent):
                nodes, depth, anchor = stack.pop()
                close(nodes, depth, anchor)
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor in open_anchors:
                    raise YamlInputError(f"{where}: line {line}: the alias *{event.anchor} refers to the node that "
                                         "holds it (a recursive structure)", line)
                nodes, depth = anchors.get(event.anchor, (1, 0))
                added += nodes
                if added > MAX_ALIAS_NODES:
                    raise YamlInputError(f"{where}: line {line}: YAML aliases expand to more than "
                                         f"{MAX_ALIAS_NODES:,} nodes (an alias bomb?)", line)
                if len(stack) + depth > MAX_DEPTH:
                    raise YamlInputError(f"{where}: line {line}: YAML nested more than {MAX_DEPTH} levels deep "
                                         "(through aliases)", line)
                close(nodes, depth, None)
            elif isinstance(event, yaml.ScalarEvent):
                plain = event.value.lstrip("+-").replace("_", "") if not event.style else ""  # C: "", Python: None
                if digits and len(plain) > digits and plain.isdigit():
                    raise YamlInputError(f"{where}: line {line}: a number of more than {digits:,} digits", line)
                close(1, 0, event.anchor)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, where) from None
    finally:
        loader.dispose()


_COLLECTION_START = None  # compiled on first use: a collection indicator (block "- ", "key: ", "? "; flow "[", "{")


def within_bounds(text: str) -> bool:
    """True where ``text`` cannot break a bound ``check_yaml_events`` enforces, read off its characters alone,
    so that event pass (a Python loop over every event, ~40 % of reading a small manifest) can be skipped
    with the same outcome: no alias or anchor (no ``*``, ``&``), fewer collection indicators than ``MAX_DEPTH`` (each
    collection starts at one: a block sequence at ``-`` + space, a block mapping at ``:`` + space or
    ``?`` + space, a flow collection at ``[`` or ``{``), and no longer than the longest number allowed.
    A malformed file is reported the same either way: composing parses the same events."""
    global _COLLECTION_START
    if "*" in text or "&" in text:  # an alias, or an anchor (a duplicate one fails only when composed)
        return False
    digits = max_int_digits()
    if digits and len(text) > digits:
        return False
    if sum(map(text.count, "-:?[{")) < MAX_DEPTH:  # each start is one of these: too few to count them one by one
        return True
    if _COLLECTION_START is None:
        import re

        _COLLECTION_START = re.compile(r"[-:?](?=\s|\Z)|[\[{]")
    starts = 0
    for _ in _COLLECTION_START.finditer(text):
        starts += 1
        if starts >= MAX_DEPTH:
            return False
    return True


def load_yaml(text: str, where: str) -> Any:
    """The one YAML document of ``text`` (safe types only), within the limits above."""
    docs = load_yaml_all(text, where, construct=None)
    if len(docs) > 1:
        raise YamlInputError(f"{where}: line {docs[1][1]}: expected one YAML document, found more", docs[1][1])
    return docs[0][0] if docs else None


def _nodes(loader: Any) -> Iterator[Any]:
    while loader.check_node():
        yield loader.get_node()


def load_yaml_all(text: str, where: str, *, construct: Any = None) -> list[tuple[Any, int]]:
    """Every document of ``text`` as (data, first line), within the limits above.

    ``construct(node, loader)`` builds each document from its composed node (default: PyYAML's
    safe constructor); ``kvplan.deploy.yaml_lines`` passes one that records line numbers.
    """
    yaml = yaml_module()

    if len(text) > MAX_FILE_BYTES:
        raise YamlInputError(f"{where}: more than the {_mib(MAX_FILE_BYTES)} kvplan reads from one file")
    plain = within_bounds(text)
    if not plain:
        check_yaml_events(text, where)
    loader = yaml_loader_class()(text)
    docs: list[tuple[Any, int]] = []
    try:
        # without the event pass, compose every document before building any: a syntax error anywhere is then
        # reported before a value that cannot be built, as when the event pass ran first (with no anchor or
        # alias, composing fails only where parsing does)
        nodes = list(_nodes(loader)) if plain else _nodes(loader)
        for node in nodes:
            if node is None:  # pragma: no cover - check_node says there is one
                continue
            data = construct(node, loader) if construct is not None else loader.construct_document(node)
            docs.append((data, node.start_mark.line + 1))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, where) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a date that does not exist: 2024-13-45
        raise YamlInputError(f"{where}: a value cannot be read: {str(exc)[:200]}") from None
    except RecursionError:  # pragma: no cover - depth is checked above
        raise YamlInputError(f"{where}: YAML nested too deeply") from None
    finally:
        loader.dispose()
    return docs


def read_yaml(path: str | os.PathLike) -> Any:
    """The one YAML document of regular file ``path``."""
    return load_yaml(read_text(path), os.fspath(path))
