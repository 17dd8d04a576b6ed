"""YAML loading that keeps line numbers, for findings that point into the file.

Mappings load as :class:`LDict` and sequences as :class:`LList`: plain ``dict`` / ``list`` with a
``line`` (where the node starts) and ``lines`` (where each value starts: ``lines[key]`` for a mapping,
``lines[i]`` for a sequence). Scalars load as PyYAML's safe loader makes them. Lines are 1-based; a
block scalar's line is the line of its first content line, not of its ``|`` indicator.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.safe_io import YamlInputError, load_yaml_all

__all__ = ["LDict", "LList", "YamlInputError", "load_all", "dig", "line_at", "node_line"]


class LDict(dict):
    line: int = 0
    lines: dict

    def line_of(self, key: Any, default: int | None = None) -> int:
        return self.lines.get(key, default if default is not None else self.line)


class LList(list):
    line: int = 0
    lines: list

    def line_of(self, index: int, default: int | None = None) -> int:
        if 0 <= index < len(self.lines):
            return self.lines[index]
        return default if default is not None else self.line


def node_line(node: Any) -> int:
    line = node.start_mark.line + 1
    if getattr(node, "style", None) in ("|", ">"):
        line += 1
    return line


_PLAIN_TAGS = frozenset("tag:yaml.org,2002:" + t for t in ("int", "float", "bool", "null"))
_STR_TAG = "tag:yaml.org,2002:str"


def _scalar(node: Any, loader: Any) -> Any:
    """``loader.construct_object(node, deep=True)`` for a scalar of a plain tag (str, int, float, bool, null), by
    the loader's own constructor without its bookkeeping (a memo of nodes built, a guard against recursion, which
    a scalar needs neither of); any other node or tag goes to ``construct_object``."""
    tag = node.tag
    if tag == _STR_TAG and node.id == "scalar":
        return node.value  # construct_yaml_str: the scalar's text
    if tag in _PLAIN_TAGS and node.id == "scalar":
        return loader.yaml_constructors[tag](loader, node)
    return loader.construct_object(node, deep=True)


_MERGE_TAGS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})
"""Key tags PyYAML's ``flatten_mapping`` acts on (``<<`` merge keys, ``=`` value keys); a mapping without them it
leaves as it is."""


def _convert(node: Any, loader: Any) -> Any:
    kind = node.id  # PyYAML's node kinds: "scalar", "sequence", "mapping"
    if kind == "mapping":
        return _mapping(node, loader)
    if kind == "sequence":
        seq = LList()
        seq.line = node.start_mark.line + 1
        seq_lines: list[int] = []
        seq.lines = seq_lines
        for item in node.value:
            if item.id == "scalar":  # _convert's answer and node_line's, without their calls
                seq.append(item.value if item.tag == _STR_TAG else _scalar(item, loader))
                seq_lines.append(item.start_mark.line + (2 if item.style in ("|", ">") else 1))
            else:
                seq.append(_convert(item, loader))
                seq_lines.append(item.start_mark.line + 1)
        return seq
    return _scalar(node, loader)


def _mapping(node: Any, loader: Any) -> LDict:
    out = LDict()
    out.line = node.start_mark.line + 1
    lines: dict[Any, int] = {}
    out.lines = lines
    for key_node, value_node in node.value:
        if key_node.tag in _MERGE_TAGS:  # merge keys (<<: *anchor): PyYAML's flattening, then the mapping again
            loader.flatten_mapping(node)  # (it leaves no such key behind)
            return _mapping(node, loader)
        key = key_node.value if key_node.tag == _STR_TAG and key_node.id == "scalar" else _scalar(key_node, loader)
        if type(key) is not str:
            try:
                hash(key)
            except TypeError:
                key = str(key)
        if value_node.id == "scalar":  # _convert's answer and node_line's, without their calls
            out[key] = value_node.value if value_node.tag == _STR_TAG else _scalar(value_node, loader)
            lines[key] = value_node.start_mark.line + (2 if value_node.style in ("|", ">") else 1)
        else:
            out[key] = _convert(value_node, loader)
            lines[key] = value_node.start_mark.line + 1
    return out


def load_all(text: str, where: str) -> list[tuple[Any, int]]:
    """Every document of ``text`` as (data, first line), within kvplan.safe_io's bounds on depth,
    aliases and numbers; malformed or unbounded YAML raises YamlInputError."""
    return load_yaml_all(text, where, construct=_convert)


def dig(data: Any, *path: Any) -> Any:
    """data[path0][path1]... or None where a step is missing or of the wrong type."""
    for key in path:
        if isinstance(key, int):
            if not isinstance(data, list) or not -len(data) <= key < len(data):
                return None
        elif not isinstance(data, dict):
            return None
        data = data[key] if isinstance(key, int) else data.get(key)
        if data is None:
            return None
    return data


def line_at(data: Any, *path: Any) -> int | None:
    """The line of the value at ``path`` (the deepest node that exists)."""
    line = getattr(data, "line", None)
    for key in path:
        if isinstance(data, LDict) and key in data:
            line = data.lines.get(key, line)
            data = data[key]
        elif isinstance(data, LList) and isinstance(key, int) and 0 <= key < len(data):
            line = data.lines[key]
            data = data[key]
        else:
            break
    return line
