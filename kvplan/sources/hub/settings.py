"""How long and how much kvplan asks of the Hub: environment settings and fixed caps."""

from __future__ import annotations

import math
import os

from kvplan.errors import UsageError
from kvplan.record import dataclass

# Caps on what one answer may hold: far above what the Hugging Face Hub sends, low enough that a
# broken mirror cannot fill the memory or the disk.
MAX_ANSWER_BYTES = 32 * 1024 * 1024  # any one answer (the model info of a repo with 100,000 files is ~8 MB)
MAX_SHARDS = 1024  # safetensors files read per model (DeepSeek-V3 has 163, Llama-3.1-405B 191)
RETRY_STATUS = (429, 500, 502, 503, 504)  # what is worth asking again (not a timeout: see docs/sources.md)


@dataclass(frozen=True)
class HubSettings:
    timeout_s: float  # one request, from connecting to its last byte
    tries: int  # attempts on 5xx and 429 answers
    retry_delay_s: float  # the first back-off, doubled each retry
    deadline_s: float  # the whole read of one model

    @classmethod
    def from_env(cls) -> HubSettings:
        return cls(timeout_s=_setting("KVPLAN_HUB_TIMEOUT", 10.0, "seconds", least=0.001),
                   tries=int(_setting("KVPLAN_HUB_TRIES", 3, "tries", least=1, most=100)),
                   retry_delay_s=_setting("KVPLAN_HUB_RETRY_DELAY", 1.0, "seconds", least=0.0),
                   deadline_s=_setting("KVPLAN_HUB_DEADLINE", 120.0, "seconds", least=0.001))


def _setting(name: str, default: float, unit: str, *, least: float, most: float = 86_400.0) -> float:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"{name}={value!r} is not a number") from None
    if not (math.isfinite(number) and least <= number <= most):
        raise UsageError(f"{name}={value!r}: expected {least:g} to {most:g} {unit}")
    return number
