"""JSON output: the result's stable dictionary, pretty-printed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def estimates_dict(results: Sequence[Any], *, explain: bool = False) -> dict[str, Any]:
    """One engine: that result's own document, unchanged. Several (``-e vllm,sglang``): a document
    with ``kvplan_version`` and ``results``, one result document per engine, in the order asked."""
    if len(results) == 1:
        return results[0].to_dict(explain=explain)
    docs = [r.to_dict(explain=explain) for r in results]
    return {"kvplan_version": docs[0]["kvplan_version"], "results": docs}
