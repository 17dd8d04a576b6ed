"""JSON output: the result's stable dictionary, pretty-printed."""

from __future__ import annotations

import json
from typing import Any


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"
