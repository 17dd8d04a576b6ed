"""SGLang's settings as kvplan plans them (``SGLANG.settings``): the command line is generated from this table."""

from __future__ import annotations

from kvplan.engines.settings import (CPU_OFFLOAD_GB, DTYPE, ENFORCE_EAGER, MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS,
                                     OFFLOAD_LINK, QUANTIZATION, Setting, allow_long, expert_parallel, number)

SETTINGS: tuple[Setting, ...] = (
    Setting("mem_fraction_static", ("--mem-fraction-static",), "The static memory fraction.", "settings",
            convert=number, serve=("--mem-fraction-static",)),
    MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS, ENFORCE_EAGER, expert_parallel("--enable-dp-attention"), QUANTIZATION,
    DTYPE,
    allow_long("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"),
    Setting("enable_hierarchical_cache", (), "The host pool of the hierarchical cache.", "options",
            file_key="enable_hierarchical_cache", serve=("--enable-hierarchical-cache",)),
    Setting("hicache_ratio", ("--hicache-ratio",), "--enable-hierarchical-cache: host pool = ratio x device pool "
            "(the default 2.0).", "options", convert=number, file_key="hicache_ratio", serve=("--hicache-ratio",)),
    Setting("hicache_size", ("--hicache-size",), "Host pool GB (10^9 B) per rank, instead of the ratio.",
            "options", field="hicache_size_gb", convert=number, file_key="hicache_size", serve=("--hicache-size",)),
    CPU_OFFLOAD_GB, OFFLOAD_LINK,
    Setting("disable_radix_cache", (), "No prefix sharing.", "options", file_key="disable_radix_cache",
            serve=("--disable-radix-cache",)),
)
