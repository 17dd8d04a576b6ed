"""Errors kvplan reports to a user as one line (exit status 2), never as a traceback."""

from __future__ import annotations


class KvplanError(ValueError):
    """A problem with what the user asked for or gave kvplan: reported as one line, exit 2.

    It is a ValueError so that pydantic, validating a spec, turns it into a field error.
    ``field`` names the library parameter at fault ("tp", "max_model_len", ...), for a caller (the
    CLI) to name its own spelling of it.
    """

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class SpecError(KvplanError):
    """A model description is inconsistent or incomplete."""


class ConfigError(KvplanError):
    """A config.json / YAML file cannot be read into a model description."""


class UsageError(KvplanError):
    """A command-line value is malformed (a list, a size, an unknown name)."""


class NotFoundError(KvplanError):
    """A model argument names no file, no bundled spec and nothing kvplan can fetch."""


class HubError(KvplanError):
    """A model cannot be read from the Hugging Face Hub: access, network, server or offline cache."""


class HubAccessError(HubError):
    """The repository is gated or private and the token in use (if any) has no access."""


class HubUnavailableError(HubError):
    """The Hub answered with server errors or timed out, after retries."""


class OfflineError(HubError):
    """HF_HUB_OFFLINE is set and what is needed is not in the local cache."""
