"""Moved: the family adapters are modules of ``kvplan.sources.families`` (one per family), where each
family's layer rule and parameter rule sit together. This name stays for code that imported it."""

from __future__ import annotations

from kvplan.sources.families import GENERIC, Family, family_for, known_model_types
from kvplan.sources.families.llama import generic_layers

__all__ = ["GENERIC", "Family", "family_for", "generic_layers", "known_model_types"]
