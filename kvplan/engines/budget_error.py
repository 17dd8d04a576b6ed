"""An engine's cross-validated budget error (its package's ``budget_error.json``) as a ``KvError``.

The table is written by the engine's cross-validation benchmark (benchmarks/crossval.py,
benchmarks/crossval_engines.py): per release band where that band has enough held-out logs, else all the
engine's logs pooled; where even the pool is small the table says so (``too_few``) and the basis names it,
so the printed range is read as the spread of a few logs, not as a 90 % band.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

import functools

from kvplan.budgets.base import KvError
from kvplan.jsontext import loads


@functools.lru_cache(maxsize=8)
def _table(path: str) -> dict[str, Any]:
    with open(path) as f:  # Path.read_text's defaults, without importing pathlib (nor json) on every check
        table: dict[str, Any] = loads(f.read())
    return table


def kv_error(path: str, band: str, title: str) -> KvError:
    """The error band for ``band`` of the engine titled ``title`` (its pooled one where the band is thin)."""
    table = _table(path)
    own = table["bands"].get(band)
    which = f"{title} {band}" if own else f"all {title} releases (too few independent logs for {band})"
    row = own or table["pooled"]
    basis = f"{which}: {row['logs']} logs from {row['sources']} sources, each judged with its source held out"
    if row.get("too_few"):
        basis += (f"; fewer than {table['min_logs']} logs from {table['min_sources']} sources: the range of "
                  "their errors, not a 90 % band")
    return KvError(row["low"], row["high"], basis, thin=bool(row.get("too_few")))
