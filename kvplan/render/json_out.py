"""JSON output: the result's stable dictionary, pretty-printed.

An estimate's rows are written as they are made (``write_estimates``), in the very bytes
``json.dumps(doc, indent=2)`` gives: the document around them is dumped once with a marker where the
rows go, and each row is encoded at its depth by the C encoder, whose item separator carries the
newline and indentation (``json.dumps`` with ``indent`` takes the pure-Python encoder, about 10x slower).
The standard ``json`` module is not imported (``kvplan.jsontext``: the same C encoder and the same bytes).
"""

from __future__ import annotations

from itertools import chain

from kvplan.jsontext import c_encoder, dumps_indented, encoder
from kvplan.jsontext import quote as json_text
from kvplan.jsontext import dumps as _dumps

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import IO, Any

_CHUNK = 512
"""Rows encoded per write: fewer calls into the stream, a bounded buffer."""


def dumps(data: dict[str, Any]) -> str:
    return dumps_indented(data) + "\n"


def estimates_dict(results: Sequence[Any], *, explain: bool = False) -> dict[str, Any]:
    """One engine: that result's own document, unchanged. Several (``-e vllm,sglang``): a document
    with ``kvplan_version`` and ``results``, one result document per engine, in the order asked."""
    return _outer([r.to_dict(explain=explain) for r in results])


def _outer(docs: list[dict[str, Any]]) -> dict[str, Any]:
    if len(docs) == 1:
        return docs[0]
    return {"kvplan_version": docs[0]["kvplan_version"], "results": docs}


def write_estimates(results: Sequence[Any], stream: IO[str], *, explain: bool = False) -> None:
    """``dumps(estimates_dict(results, explain=explain))`` written to ``stream`` with each result's rows
    encoded a block at a time: memory stays flat however many rows the sweep has."""
    from kvplan.estimate import row_blocks, row_dict

    marks = [f"\x00kvplan rows {i} {id(r)}\x00" for i, r in enumerate(results)]
    text = dumps(_outer([r.to_dict(explain=explain, rows=[mark]) for r, mark in zip(results, marks)]))
    tokens = [json_text(mark) for mark in marks]
    if any(text.count(token) != 1 for token in tokens):  # a marker also in the data: no stream, same bytes
        stream.write(dumps(estimates_dict(results, explain=explain)))
        return
    for result, token in zip(results, tokens):
        head, _, text = text.partition(token)
        pad = head[head.rindex("\n") + 1:]  # the rows' indentation: '[\n' + pad precedes the marker
        blocks = row_blocks(result.rows)
        if blocks is not None and _write_blocks(stream, head, blocks, len(pad) // 2):
            continue
        rows = iter(result.rows)
        first = next(rows, None)
        if first is None:
            stream.write(head[:-len(pad) - 1] + "]")  # no rows: '[]', as json.dumps prints an empty list
            text = text[text.index("]") + 1:]
            continue
        plain = _plain_rows(first, len(pad) // 2)
        if plain is None:
            write_items(stream, head, map(row_dict, chain([first], rows)), len(pad) // 2)
            continue
        stream.write(head + plain([first]))
        for block in _blocks(rows):
            stream.write(",\n" + pad + plain(block))
    stream.write(text)


_PLAIN_KEYS = ("batch", "context", "kv_dtype", "kv_dtype_resolved", "kv_bytes", "bytes_per_token",
               "admission_kv_bytes")
"""A row's JSON without --by-layer or sharing: these keys, each the row's attribute of that name."""


def _plain_rows(first: Any, level: int) -> Callable[[Sequence[Any]], str] | None:
    """Where rows are plain (``_PLAIN_KEYS``), a writer of a block of them at nesting ``level`` from one
    %-template (about half the time of building each row's dictionary and encoding it); None otherwise.
    The template is held to ``encode_at`` on the first row: any difference and the general path is taken."""
    from kvplan.estimate import row_dict

    data = row_dict(first)
    if tuple(data) != _PLAIN_KEYS or type(first.bytes_per_token) is not float:
        return None
    inner, outer = "\n" + "  " * (level + 1), "\n" + "  " * level
    holes = {"kv_dtype": "%s", "kv_dtype_resolved": "%s", "bytes_per_token": "%r", "admission_kv_bytes": "%s"}
    template = "{" + inner + ("," + inner).join(f'"{key}": {holes.get(key, "%d")}' for key in _PLAIN_KEYS) + \
        outer + "}"
    quoted: dict[str, str] = {}

    def quote(text: str) -> str:  # the few kv dtype names, encoded once each
        q = quoted.get(text)
        if q is None:
            q = quoted[text] = json_text(text)
        return q

    def one(row: Any) -> str:
        admitted = row.admission_kv_bytes
        return template % (row.batch, row.context, quote(row.kv_dtype), quote(row.kv_dtype_resolved), row.kv_bytes,
                           row.bytes_per_token, "null" if admitted is None else int.__repr__(admitted))

    if one(first) != encode_at(data, level) or not all(type(data[k]) is int for k in ("batch", "context", "kv_bytes")):
        return None
    between = "," + outer
    return lambda block: between.join(map(one, block))


def _write_blocks(stream: IO[str], head: str, blocks: Iterator[Any], level: int) -> bool:
    """``head`` then the rows of ``blocks`` (``RowBlock``s: plain rows, ``_PLAIN_KEYS``) at nesting ``level``, each
    from a %-template with the block's dtype names in place (no row object, no dictionary, no encoder call per row);
    False, with nothing written, where there is no row or the first row's text is not ``encode_at``'s."""
    from kvplan.estimate import row_dict

    inner, outer = "\n" + "  " * (level + 1), "\n" + "  " * level
    between = "," + outer
    templates: dict[tuple[str, str, bool], str] = {}
    wrote = False
    for block in blocks:
        if not block.contexts:
            continue
        admitted = block.admission_kv_bytes
        key = (block.kv_dtype, block.kv_dtype_resolved, admitted is None)
        template = templates.get(key)
        if template is None:
            values = {"batch": "%d", "context": "%d", "kv_dtype": json_text(block.kv_dtype).replace("%", "%%"),
                      "kv_dtype_resolved": json_text(block.kv_dtype_resolved).replace("%", "%%"), "kv_bytes": "%d",
                      "bytes_per_token": "%r", "admission_kv_bytes": "null" if admitted is None else "%d"}
            template = templates[key] = "{" + inner + ("," + inner).join(
                f'"{name}": {values[name]}' for name in _PLAIN_KEYS) + outer + "}"
            if not wrote and template % _fields(block, 0) != encode_at(row_dict(next(block.rows())), level):
                return False  # never taken while row_dict's keys are _PLAIN_KEYS: the bytes are checked, not assumed
        columns = (block.batches, block.contexts, block.kv_bytes, block.bytes_per_token)
        text = between.join([template % row for row in (zip(*columns) if admitted is None else
                                                         zip(*columns, admitted))])
        stream.write((between if wrote else head) + text)
        wrote = True
    return wrote


def _fields(block: Any, i: int) -> tuple[Any, ...]:
    """Row ``i`` of ``block`` as its template takes it."""
    values = (block.batches[i], block.contexts[i], block.kv_bytes[i], block.bytes_per_token[i])
    return values if block.admission_kv_bytes is None else (*values, block.admission_kv_bytes[i])


def write_items(stream: IO[str], head: str, items: Iterable[Any], level: int) -> bool:
    """``head`` then ``items`` as the elements of an indented list, each at nesting ``level``, ``_CHUNK`` to a
    write; False (nothing written) when there are none."""
    between = ",\n" + "  " * level
    wrote = False
    for block in _blocks(items):
        text = _flat_objects(block, level)
        if text is None:
            text = between.join(encode_at(item, level) for item in block)
        stream.write((between if wrote else head) + text)
        wrote = True
    return wrote


def _flat_objects(items: Sequence[Any], level: int) -> str | None:
    """Flat objects (no value an object or a list), each at nesting ``level``, joined as list elements, by one
    call of the C encoder: its item separator indents the members, and the joints between objects,
    '},<separator>{', which occur nowhere else (a string's line breaks are escaped), are replaced by their
    indented form. None where the items are not all flat, non-empty objects."""
    flat = _c_encoder(level + 1)
    if flat is None or not all(type(d) is dict and d and _SCALARS.issuperset(map(type, d.values())) for d in items):
        return None
    inner = "\n" + "  " * (level + 1)
    outer = "\n" + "  " * level
    text = "".join(flat(items, 0))  # '[{...},<inner>{...}]'
    return "{" + inner + text[2:-2].replace("}," + inner + "{", outer + "}," + outer + "{" + inner) + outer + "}"


def _blocks(items: Iterable[Any]) -> Iterator[list[Any]]:
    block: list[Any] = []
    for item in items:
        block.append(item)
        if len(block) == _CHUNK:
            yield block
            block = []
    if block:
        yield block


_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types json encodes as one token; a subclass takes the general path."""

_C_ENCODERS: dict[int, Any] = {}


def _c_encoder(level: int) -> Any:
    """The C encoder whose item separator breaks the line and indents to ``level`` (``kvplan.jsontext``): a flat object comes out as ``json.dumps(indent=2)`` prints it there, less its first and last
    line breaks. Made once per level (``JSONEncoder.encode`` makes one per call)."""
    if level not in _C_ENCODERS:
        _C_ENCODERS[level] = c_encoder(",\n" + "  " * level)
    return _C_ENCODERS[level]


def encode_at(value: Any, level: int) -> str:
    """``value`` as ``json.dumps(..., indent=2)`` prints it at nesting ``level`` (the text after the key or
    the indentation of a list element)."""
    if isinstance(value, dict):
        if not value or not all(type(k) is str for k in value):
            return _fallback(value, level)
        inner = "  " * (level + 1)
        if _SCALARS.issuperset(map(type, value.values())):
            return "{\n" + inner + encoder(",\n" + inner, ": ")(value)[1:-1] + \
                "\n" + "  " * level + "}"
        items = (json_text(k) + ": " + encode_at(v, level + 1) for k, v in value.items())
        return "{\n" + inner + (",\n" + inner).join(items) + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = "  " * (level + 1)
        objects = _flat_objects(value, level + 1)
        if objects is not None:
            return "[\n" + inner + objects + "\n" + "  " * level + "]"
        if _SCALARS.issuperset(map(type, value)):
            return "[\n" + inner + encoder(",\n" + inner, ": ")(value)[1:-1] + \
                "\n" + "  " * level + "]"
        return "[\n" + inner + (",\n" + inner).join(encode_at(v, level + 1) for v in value) + "\n" + \
            "  " * level + "]"
    return _dumps(value)


def _fallback(value: Any, level: int) -> str:
    """What the fast paths leave (empty objects, keys other than text): json.dumps itself, re-indented."""
    return dumps_indented(value).replace("\n", "\n" + "  " * level)
