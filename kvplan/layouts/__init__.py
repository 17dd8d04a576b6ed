"""Per-attention-kind arithmetic: what one layer stores per token (or per sequence).

One module per kind. A layout knows the *shape* of what is cached; how many tokens an engine keeps
(whole blocks, a window, a chunk) is the engine's rule and lives in ``kvplan.engines``.
"""

from kvplan.layouts.base import TokenCost

__all__ = ["TokenCost"]
