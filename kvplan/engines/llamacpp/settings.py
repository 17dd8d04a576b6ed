"""llama.cpp's settings as kvplan plans them (``LLAMACPP.settings``): the command line is generated from this
table."""

from __future__ import annotations

from kvplan.engines.settings import Setting, switch_or_none

SETTINGS: tuple[Setting, ...] = (
    Setting("swa_full", ("--swa-full",), "A full-size cache for sliding-window layers.", "options", switch=True,
            estimate=True, serve=("--swa-full",)),
    Setting("no_kv_offload", ("--no-kv-offload", "-nkvo"), "The KV cache stays in host memory (the GPU holds none "
            "of it); give the host memory it may use as --kv-cache-memory.", "options", convert=switch_or_none,
            switch=True, serve=("--no-kv-offload",)),
)
