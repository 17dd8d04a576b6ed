"""Errors kvplan reports to a user as one line (exit status 2), never as a traceback."""

from __future__ import annotations


class KvplanError(ValueError):
    """A problem with what the user asked for or gave kvplan: reported as one line, exit 2.

    It is a ValueError so that pydantic, validating a spec, turns it into a field error.
    """


class SpecError(KvplanError):
    """A model description is inconsistent or incomplete."""


class ConfigError(KvplanError):
    """A config.json / YAML file cannot be read into a model description."""


class UsageError(KvplanError):
    """A command-line value is malformed (a list, a size, an unknown name)."""


class NotFoundError(KvplanError):
    """A model argument names no file, no bundled spec and nothing kvplan can fetch."""
