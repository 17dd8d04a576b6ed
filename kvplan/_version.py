"""kvplan's version: the one place it is written (pyproject.toml reads it; hatch dynamic version)."""

__version__ = "0.1.0"
