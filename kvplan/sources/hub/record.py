"""kvplan's own cache of a commit's safetensors headers (huggingface_hub caches files, not parsed headers).

Stored at ``$HF_HOME/kvplan/safetensors/models--<org>--<name>/<commit>.json``: bytes and element
counts by dtype for each file, so that a model read once online is read the same way offline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RECORD_FORMAT = 1
_MAX_RECORD_BYTES = 64 * 1024 * 1024


def record_path(repo: str, sha: str) -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "kvplan" / "safetensors" / ("models--" + repo.replace("/", "--")) / f"{sha}.json"


def read_record(repo: str, sha: str) -> dict[str, Any] | None:
    path = record_path(repo, sha)
    if not path.exists():
        return None
    from kvplan.errors import ConfigError
    from kvplan.safe_io import parse_json, read_text

    try:
        data = parse_json(read_text(path, limit=_MAX_RECORD_BYTES), str(path))
    except ConfigError:
        return None  # unreadable: read the headers again (and write it anew)
    files = data.get("files") if isinstance(data, dict) else None
    if not (isinstance(data, dict) and data.get("format") == RECORD_FORMAT and data.get("commit") == sha
            and (files is None or isinstance(files, dict) and all(isinstance(v, dict) for v in files.values()))):
        return None
    return data


def write_record(repo: str, sha: str, record: dict[str, Any]) -> None:
    path = record_path(repo, sha)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass  # a read-only cache only costs the headers again next time
