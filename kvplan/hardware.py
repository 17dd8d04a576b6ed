"""GPUs kvplan can plan for: the memory each one reports to torch, and its spec-sheet rates.

The catalog ships as ``kvplan/data/gpus.yaml``; every figure in it names the log or sheet it comes
from. Commands read its JSON twin ``gpus.json`` (``tools/build_data.py`` writes it; a test holds the two
equal), so looking up a GPU imports no yaml. ``memory_bytes`` is what ``torch.cuda.get_device_properties(i).total_memory`` (and the total of
``torch.cuda.mem_get_info()``) reports, not the marketing size: an "80 GB" H100 reports 79.18 GiB.
A user catalog in the same format can add GPUs or replace shipped ones (``load_catalog(extra=...)``).

``find_gpu`` resolves a name or alias (``H100``, ``NVIDIA H100 80GB HBM3``, ``rtx_4090``);
``gpu_from_memory`` makes an ad-hoc GPU from a size (``--gpu-memory 47.5GiB``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from functools import lru_cache

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.errors import ConfigError, UsageError
from kvplan.record import dataclass, field

if TYPE_CHECKING:  # pathlib, decimal and difflib are imported where used: not on every command's start-up
    from pathlib import Path

CATALOG_NAME = "gpus.yaml"
VENDORS = ("nvidia", "amd", "intel", "other")
KNOWN_VENDORS = frozenset(VENDORS) - {"other"}
"""Vendors an engine's platform rule can judge ("other": a GPU made from a size, or unlisted)."""
VENDOR_TITLES = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "other": "other"}

#: How ``memory_bytes`` was obtained: printed exactly, torch's integer MiB, or a rounded GiB figure.
PRECISIONS = ("exact", "mib", "gib")

_MEMORY_KEYS = {"memory_bytes": "exact", "memory_mib": "mib", "memory_gib": "gib"}
_REQUIRED = ("name", "vendor", "hbm_bandwidth_bytes_per_s", "bf16_dense_tflops", "memory_source",
             "spec_source")
_KNOWN = {"name", "aliases", "vendor", *_MEMORY_KEYS, "memory_source", "marketing_memory_gb",
          "hbm_bandwidth_bytes_per_s", "bf16_dense_tflops", "spec_source", "estimate", "unified_memory", "notes"}


@dataclass(frozen=True)
class GPU:
    """One device. ``bandwidth`` is bytes/s (spec-sheet peak), ``tflops`` dense bf16 TFLOP/s; both are
    None for a GPU made from a bare memory size. ``sources`` maps ``memory`` and ``spec`` to citations."""

    name: str
    aliases: tuple[str, ...]
    vendor: str
    memory_bytes: int
    bandwidth: float | None
    tflops: float | None
    sources: Mapping[str, str] = field(default_factory=dict, hash=False)
    marketing_memory_gb: float | None = None
    memory_precision: str = "exact"
    estimate: bool = False
    notes: str = ""
    origin: str = ""
    unified_memory: bool = False
    """The device's memory is the host's too (DGX Spark's GB10): what an engine finds free depends on the operating
    system, so check never offers it as the larger GPU a deployment needs."""

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / (1 << 30)

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON fields (docs: ``kvplan gpus -f json``)."""
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "vendor": self.vendor,
            "memory_bytes": self.memory_bytes,
            "memory_gib": round(self.memory_gib, 4),
            "memory_precision": self.memory_precision,
            "marketing_memory_gb": self.marketing_memory_gb,
            "hbm_bandwidth_bytes_per_s": self.bandwidth,
            "bf16_dense_tflops": self.tflops,
            "estimate": self.estimate,
            "unified_memory": self.unified_memory,
            "memory_source": self.sources.get("memory", ""),
            "spec_source": self.sources.get("spec", ""),
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------- sizes

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}
MAX_BYTES = 1 << 50  # 1 PiB: far beyond any one device


def parse_bytes(text: str, what: str = "gpu-memory") -> int:
    """'69524783104' / '30.5GiB' / '80GB' / '512MiB' -> bytes (GB = 10^9, GiB = 2^30), rounded down."""
    raw = str(text)
    if raw.strip().startswith("-"):
        raise UsageError(f"'{raw}' must be a positive size", field=what.replace("-", "_"))
    import re  # here, where a size is read: importing re costs ~6 ms of a start

    # matched against the stripped text: one \s* between number and unit keeps the search linear (two \s*
    # around an optional unit backtrack quadratically over a long run of spaces)
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)", raw.strip())
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise UsageError(f"'{raw}' is not a size (examples: 69524783104, 30.5GiB, 80GB, 512MiB; "
                         "units B, KB/MB/GB/TB = 10^3.., KiB/MiB/GiB/TiB = 2^10..)", field=what.replace("-", "_"))
    if len(m.group(1).partition(".")[0].lstrip("0")) > 20:  # past 10^20 bytes: no Decimal arithmetic (Overflow)
        raise UsageError(f"'{raw}' is absurdly large for one GPU", field=what.replace("-", "_"))
    # decimal here, not at import: it costs every start a few ms
    from decimal import Decimal, InvalidOperation

    if unit in ("", "b") and "." in m.group(1) and Decimal(m.group(1)) % 1:
        raise UsageError(f"'{raw}' is a fraction of a byte: a bare number is bytes, as vLLM reads it "
                         f"(did you mean {m.group(1)}GiB?)", field=what.replace("-", "_"))
    try:
        value = Decimal(m.group(1)) * _UNITS[unit]
    except InvalidOperation:  # pragma: no cover - the pattern admits only plain decimals
        raise UsageError(f"'{raw}' is not a size", field=what.replace("-", "_")) from None
    n = int(value)  # whole bytes, rounded down
    if n <= 0:
        raise UsageError(f"'{raw}' must be at least one byte", field=what.replace("-", "_"))
    if n > MAX_BYTES:
        raise UsageError(f"'{raw}' is absurdly large for one GPU", field=what.replace("-", "_"))
    return n


def gpu_from_memory(text: str) -> GPU:
    """An ad-hoc GPU for ``--gpu-memory SIZE``: the given bytes, no bandwidth or compute figures."""
    from kvplan.units import format_bytes

    n = parse_bytes(text)
    return GPU(name=f"custom ({format_bytes(n)})", aliases=(), vendor="other", memory_bytes=n,
               bandwidth=None, tflops=None, sources={"memory": f"--gpu-memory {text.strip()}"},
               origin="command line")


# --------------------------------------------------------------------------------------- catalog

def catalog_path() -> Path:
    from pathlib import Path

    return Path(_catalog_file())


@lru_cache(maxsize=1)
def _catalog_file() -> str:
    return os.path.join(os.path.dirname(os.path.realpath(__file__)), "data", CATALOG_NAME)


def load_catalog(extra: str | os.PathLike[str] | None = None) -> tuple[GPU, ...]:
    """The shipped catalog, then ``extra`` (same format): an entry whose name matches a shipped one
    (case, spaces, '-' and '_' ignored) replaces it in place; any other entry is appended."""
    gpus = _cached_catalog(_catalog_file())
    if extra is None:
        return gpus
    from pathlib import Path

    merged = {_norm(g.name): g for g in gpus}
    for gpu in _cached_catalog(str(Path(extra))):  # named as pathlib spells it ('./a.yaml' -> 'a.yaml')
        merged[_norm(gpu.name)] = gpu  # dict keeps the shipped position for replacements
    return tuple(merged.values())


def _cached_catalog(path: str) -> tuple[GPU, ...]:
    """A catalog file read once per version of it: ``kvplan check`` asks for it once per deployment."""
    try:
        info = os.stat(path)
    except OSError:
        return _read_catalog(path)  # the reader says what is wrong
    return _read_catalog_version(str(path), info.st_mtime_ns, info.st_size)


@lru_cache(maxsize=8)
def _read_catalog_version(path: str, mtime_ns: int, size: int) -> tuple[GPU, ...]:
    return _read_catalog(path)


def _read_catalog(path: str | os.PathLike[str], validate: bool = False) -> tuple[GPU, ...]:
    """The GPUs of a catalog file. Every check a user's catalog gets is run on it; the shipped one, unless
    ``validate``, is built as it stands (``_shipped_entry``): tests/test_hardware.py validates it in full and holds
    the two readings equal, so a broken shipped file fails CI instead of costing every command ~1.5 ms."""
    where = os.fspath(path)
    if where == _catalog_file():
        # the shipped catalog, from its JSON twin (tools/build_data.py; a test holds it equal to the YAML):
        # no yaml import on a command's start-up
        from kvplan.data_files import read_bundled

        data = read_bundled(path)
        if not validate:
            return tuple(_shipped_entry(entry, where) for entry in data["gpus"])
    else:
        from kvplan.safe_io import load_yaml, read_text

        if not os.path.exists(where):
            raise ConfigError(f"{where}: GPU catalog not found")
        # regular files only, bounded size, UTF-8; bounded depth, aliases and numbers
        data = load_yaml(read_text(path), where)
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise ConfigError(f"{where}: a GPU catalog is a mapping with a 'gpus:' list")
    version = data.get("version", 1)
    if version != 1:
        raise ConfigError(f"{where}: version: {version!r} is not supported (kvplan reads version 1)")
    gpus: list[GPU] = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(data["gpus"]):
        gpu = _entry(entry, f"{where}: gpus[{i}]", where)
        for key in (gpu.name, *gpu.aliases):
            k = _norm(key)
            if k in seen and seen[k] != gpu.name:
                raise ConfigError(f"{where}: gpus[{i}] ({gpu.name}): '{key}' already names {seen[k]}")
            seen[k] = gpu.name
        gpus.append(gpu)
    return tuple(gpus)


def _shipped_entry(entry: dict[str, Any], origin: str) -> GPU:
    """A GPU of the shipped catalog as ``_entry`` makes it, without its checks (see ``_read_catalog``)."""
    key = "memory_bytes" if "memory_bytes" in entry else "memory_mib" if "memory_mib" in entry else "memory_gib"
    value = entry[key]
    return GPU(
        name=entry["name"],
        aliases=tuple(entry.get("aliases", ())),
        vendor=entry["vendor"],
        memory_bytes=value if key == "memory_bytes" else value << 20 if key == "memory_mib" else _gib_bytes(value),
        bandwidth=entry["hbm_bandwidth_bytes_per_s"],
        tflops=entry["bf16_dense_tflops"],
        sources={"memory": entry["memory_source"], "spec": entry["spec_source"]},
        marketing_memory_gb=entry.get("marketing_memory_gb"),
        memory_precision=_MEMORY_KEYS[key],
        estimate=entry.get("estimate", False),
        notes=entry.get("notes", ""),
        origin=origin,
        unified_memory=entry.get("unified_memory", False),
    )


def _entry(entry: Any, at: str, origin: str) -> GPU:
    if not isinstance(entry, dict):
        raise ConfigError(f"{at}: each GPU is a mapping of fields")
    label = f"{at} ({entry['name']})" if isinstance(entry.get("name"), str) else at
    unknown = sorted(set(map(str, entry)) - _KNOWN)
    if unknown:
        raise ConfigError(f"{label}: unknown field '{unknown[0]}'")
    for key in _REQUIRED:
        if entry.get(key) in (None, ""):
            raise ConfigError(f"{label}: field '{key}' is required")
    name = _text(entry, "name", label)
    vendor = _text(entry, "vendor", label).lower()
    if vendor not in VENDORS:
        raise ConfigError(f"{label}: vendor '{vendor}' is not one of {', '.join(VENDORS)}")
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise ConfigError(f"{label}: field 'aliases' must be a list of names (quote numbers: \"4090\")")
    given = [k for k in _MEMORY_KEYS if entry.get(k) is not None]
    if len(given) != 1:
        raise ConfigError(f"{label}: give exactly one of memory_bytes, memory_mib, memory_gib")
    memory_key = given[0]
    memory_bytes = _memory(entry[memory_key], memory_key, label)
    estimate = entry.get("estimate", False)
    if not isinstance(estimate, bool):
        raise ConfigError(f"{label}: field 'estimate' must be true or false")
    unified = entry.get("unified_memory", False)
    if not isinstance(unified, bool):
        raise ConfigError(f"{label}: field 'unified_memory' must be true or false")
    marketing = entry.get("marketing_memory_gb")
    if marketing is not None:
        marketing = _positive(marketing, "marketing_memory_gb", label)
    notes = entry.get("notes", "")
    if not isinstance(notes, str):
        raise ConfigError(f"{label}: field 'notes' must be text")
    return GPU(
        name=name,
        aliases=tuple(a.strip() for a in aliases),
        vendor=vendor,
        memory_bytes=memory_bytes,
        bandwidth=_positive(entry["hbm_bandwidth_bytes_per_s"], "hbm_bandwidth_bytes_per_s", label),
        tflops=_positive(entry["bf16_dense_tflops"], "bf16_dense_tflops", label),
        sources={"memory": _text(entry, "memory_source", label), "spec": _text(entry, "spec_source", label)},
        marketing_memory_gb=marketing,
        memory_precision=_MEMORY_KEYS[memory_key],
        estimate=estimate,
        notes=notes.strip(),
        origin=origin,
        unified_memory=unified,
    )


def _text(entry: dict, key: str, label: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{label}: field '{key}' must be non-empty text")
    if value.isprintable() and "  " not in value and value[0] != " " and value[-1] != " ":
        return value  # already " ".join(value.split()): every other whitespace character is unprintable
    return " ".join(value.split())




def _number(text: str) -> bool:
    import re

    return re.match(r"^[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?$", text.strip()) is not None


def _positive(value: Any, key: str, label: str) -> float:
    if isinstance(value, str) and _number(value):  # PyYAML reads 3.35e12 as text
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{label}: field '{key}' must be a positive number, not {value!r}")
    return value


def _gib_bytes(value: float) -> int:
    """``int(Decimal(str(value)) * 2**30)``, bytes of a size in GiB, rounded down. A plain decimal of at most 17 digits
    (every GPU of the catalog) is computed on integers, exactly as Decimal does it (the product has at most 27
    digits, within its 28): reading the catalog then does not import decimal (a few ms of every command)."""
    text = str(value)
    whole, _, frac = text.partition(".")
    if (whole + frac).isdigit() and whole.isascii() and frac.isascii() and len(whole + frac) <= 17:
        return int(whole + frac) * (1 << 30) // 10 ** len(frac)
    from decimal import Decimal

    return int(Decimal(text) * (1 << 30))


def _memory(value: Any, key: str, label: str) -> int:
    if key == "memory_bytes":
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{label}: field 'memory_bytes' must be a positive whole number of bytes, "
                              f"not {value!r}")
        n = value
    elif key == "memory_mib":
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{label}: field 'memory_mib' must be a positive whole number, not {value!r}")
        n = value << 20
    else:
        _positive(value, key, label)
        n = _gib_bytes(value)
    if n > MAX_BYTES:
        raise ConfigError(f"{label}: field '{key}' is absurdly large for one GPU")
    return n


# --------------------------------------------------------------------------------------- lookup



def _norm(name: str) -> str:
    # the name less its spaces, underscores and dashes (the pattern [\s_-]+ removed, without importing re);
    # remembered: every lookup normalises the whole catalog's names and aliases again (~130 of them)
    found = _NORMS.get(name)
    if found is None:
        if len(_NORMS) >= 4096:  # names also come from users' files: keep it small
            _NORMS.clear()
        # str.split() cuts at exactly the characters str.isspace() names: C calls, not a generator per character
        found = _NORMS[name] = "".join(name.split()).replace("_", "").replace("-", "").lower()
    return found


_NORMS: dict[str, str] = {}


def find_gpu(name: str, catalog: Iterable[GPU]) -> GPU:
    """The GPU ``name`` designates: a canonical name first, then an alias (a later catalog entry, i.e.
    a user's, wins). Case, spaces, '_' and '-' are ignored: 'h100 sxm 80gb', 'RTX_4090'."""
    gpus = tuple(catalog)
    key = _norm(name)
    by_name, by_alias = _index(gpus)
    if key and key in by_name:
        return by_name[key]
    if key and key in by_alias:
        return by_alias[key]
    raise UsageError(f"unknown GPU '{name.strip()}'{_suggest(name, gpus)}", field="gpu")


def _index(gpus: tuple[GPU, ...]) -> tuple[dict[str, GPU], dict[str, GPU]]:
    """The catalog's GPUs by normalised name and by normalised alias (a later entry wins), made once per catalog
    tuple: ``kvplan check`` looks up a GPU several times a deployment in the same cached catalog (~130 names)."""
    found = _INDEXES.get(id(gpus))
    if found is not None and found[0] is gpus:  # the same tuple, held here: its id is not reused
        return found[1], found[2]
    by_name = {_norm(g.name): g for g in gpus}
    by_alias: dict[str, GPU] = {}
    for g in gpus:
        for alias in g.aliases:
            by_alias[_norm(alias)] = g
    if len(_INDEXES) >= 8:  # a user's catalogs merged on each call make new tuples: keep it small
        _INDEXES.clear()
    _INDEXES[id(gpus)] = (gpus, by_name, by_alias)
    return by_name, by_alias


_INDEXES: dict[int, tuple[tuple[GPU, ...], dict[str, GPU], dict[str, GPU]]] = {}


def _suggest(name: str, gpus: tuple[GPU, ...]) -> str:
    key = _norm(name)
    spelled: dict[str, str] = {}  # normalized -> canonical name
    for g in gpus:
        for n in (g.name, *g.aliases):
            spelled.setdefault(_norm(n), g.name)
    family = [canonical for n, canonical in spelled.items() if key and n.startswith(key)]  # 'a100'
    import difflib

    close = [spelled[c] for c in difflib.get_close_matches(key, list(spelled), n=8, cutoff=0.6)]
    names = list(dict.fromkeys([*family, *close]))[:4]
    if names:
        return f" (did you mean {', '.join(names)}?)"
    return " (see `kvplan gpus`, or give --gpu-memory SIZE)"
