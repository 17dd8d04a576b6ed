"""Per-engine GPU memory budgets: how much of a GPU each engine leaves for the KV cache.

One module per engine; each returns a ``GpuBudget`` whose items are tagged given (from the user),
computed (from the model and the engine's rules) or assumed (kvplan's estimate of what the engine
would measure at start-up: activation peaks, CUDA graphs, non-torch allocations).
"""

from kvplan.budgets.base import GpuBudget, MemoryItem, Settings

__all__ = ["GpuBudget", "MemoryItem", "Settings"]
