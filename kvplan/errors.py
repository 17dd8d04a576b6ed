"""Errors kvplan reports to a user as one line (exit status 2), never as a traceback.

Every error may carry ``field``: the name of the library parameter at fault, as Python spells it
(``"max_model_len"``, ``"kv_dtype"``, ``"tp"``, ``"contexts"``, ``"gpu"`` ...). Messages never name a
command-line flag: the CLI maps the field to its own flag (``--max-model-len``) and prints
``kvplan: error: --max-model-len: must be at least 1``. A program reads ``exc.field`` and
``exc.message``; ``str(exc)`` is ``"max_model_len: must be at least 1"``.
"""

from __future__ import annotations


class KvplanError(ValueError):
    """A problem with what the user asked for or gave kvplan: reported as one line, exit 2.

    It is a ValueError so that pydantic, validating a spec, turns it into a field error.
    """

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class SpecError(KvplanError):
    """A model description is inconsistent or incomplete."""


ModelSpecError = SpecError
"""The name the library API documents for an invalid model description (``ModelSpecError(field=...)``)."""


class ConfigError(KvplanError):
    """A config.json / YAML file cannot be read into a model description."""


class UsageError(KvplanError):
    """A parameter value is malformed or out of range (a list, a size, an unknown name)."""


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
