"""How far TensorRT-LLM's own KV memory may lie from kvplan's budget, by release band (budget_error.json,
written by benchmarks/crossval_engines.py --intervals from kvplan's errors on real start-up logs).

No TensorRT-LLM budget size is fitted to logs (the fraction is the engine's default or the one given; the
warm-up peak and context are kvplan's assumptions, set before these logs were read; the C++ runtime's buffers and
decoder are summed from the code's tensor shapes, runtime.py), so each log's error is already out of sample.

Most logs are prebuilt TensorRT engines (the C++ runtime, releases before 1.0). There the fraction takes the memory
free after the engine's weights, its execution context (TensorRT's activation memory, fixed at build time from the
largest profile: docs/source/reference/memory.md "Activation size"), the runtime buffers and the decoder, which grow
with the build's max_batch_size, max_seq_len and the vocabulary (budget.py, runtime.py). The crossval gives each log
its build's sizes where its source states them and the context and buffers it prints; the execution context is
kvplan's forward-pass estimate where not printed (the 0.9 RTX 3090 log's 4.4 GiB outside weights and KV is not
explained by it: the largest error).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True

import os

from kvplan.engines.version import Version

if TYPE_CHECKING:
    from kvplan.budgets.base import KvError

RELEASE_BANDS = (((0, 0), "< 1.0"), ((1, 0), "1.0+"))
"""0.x: mostly prebuilt TensorRT engines (the C++ runtime); 1.0 on: the PyTorch backend is the default."""


def release_band(version: Version) -> str:
    return [name for since, name in RELEASE_BANDS if version >= since][-1]


def kv_error(version: Version) -> "KvError":
    from kvplan.engines.budget_error import kv_error as read

    return read(os.path.join(os.path.dirname(__file__), "budget_error.json"), release_band(version), "TensorRT-LLM")
