"""huggingface_hub and network failures as one-line kvplan errors (the token is never printed).

Messages never include a server's own text or a URL: a hostile server could put anything there,
and a URL may carry credentials.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from kvplan.errors import (
    HubAccessError,
    HubError,
    HubUnavailableError,
    KvplanError,
    NotFoundError,
    OfflineError,
    UsageError,
)
from kvplan.record import dataclass

_CLIENT_MODULES = ("huggingface_hub", "httpx", "httpcore", "h11", "h2", "anyio", "ssl", "json", "socket")


@dataclass(frozen=True)
class Where:
    """Which read failed: for the messages."""

    repo: str
    revision: str | None
    endpoint: str  # shown without credentials
    cache: str
    offline: bool
    fallback: bool  # the Hub was tried because the name is no file and no bundled model
    tries: int
    timeout_s: float

    @property
    def at(self) -> str:
        return f"{self.repo}@{self.revision}" if self.revision else self.repo


def shown_endpoint(url: str) -> str:
    """``HF_ENDPOINT`` without any ``user:password@``."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "HF_ENDPOINT"


def in_chain(exc: BaseException, test: Callable[[BaseException], bool]) -> BaseException | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if test(current):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _from_client(exc: BaseException) -> bool:
    """Raised inside huggingface_hub or its HTTP stack (not a bug of kvplan's own code)."""
    tb: TracebackType | None = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_globals.get("__name__", "")
        tb = tb.tb_next
    module = type(exc).__module__
    return bool(last and last.startswith(_CLIENT_MODULES)) or module.startswith(_CLIENT_MODULES[:5])


def explain(exc: Exception, w: Where) -> KvplanError | None:
    """A one-line kvplan error for a huggingface_hub / network failure (None: a kvplan bug, not ours to hide)."""
    from huggingface_hub import errors as e
    from huggingface_hub.utils import get_token

    token = get_token() is not None
    repo, at, endpoint = w.repo, w.at, w.endpoint
    if isinstance(exc, e.GatedRepoError):
        who = "the token in use (HF_TOKEN) has no access" if token else "no token is set"
        return HubAccessError(f"{repo} is a gated model and {who}: accept its conditions on "
                              f"{endpoint}/{repo} and set HF_TOKEN to a token with access")
    if isinstance(exc, e.RevisionNotFoundError):
        return NotFoundError(f"revision '{w.revision or 'main'}' of {repo} does not exist on the Hub")
    if isinstance(exc, e.DisabledRepoError):
        return HubAccessError(f"{repo}: access to this repository is disabled on the Hub")
    if isinstance(exc, e.RepositoryNotFoundError):
        if token:
            return HubAccessError(f"{repo} was not found on the Hub, or it is private and the token in use "
                                  "(HF_TOKEN) has no access to it")
        return NotFoundError(f"'{repo}' is not a file or a bundled model, and the Hub has no public model "
                             f"by that id (a private one needs HF_TOKEN set to a token with access){_close(repo, '; ')}")
    lead = f"'{repo}' is not a file or a bundled model{_close(repo, ' ')}, and " if w.fallback else ""
    if w.offline and isinstance(exc, (e.OfflineModeIsEnabled, e.LocalEntryNotFoundError)):
        return OfflineError(f"{lead}HF_HUB_OFFLINE is set and {at} is not in the HF cache ({w.cache}): run kvplan "
                            f"once online, or pin the model with `kvplan spec {repo} > spec.yaml` and estimate that file")
    why = transient(exc, w)
    if why is not None:
        return HubUnavailableError(f"{at}: {why} ({endpoint}); try again later, or set HF_HUB_OFFLINE=1 to use "
                                   "the HF cache")
    if in_chain(exc, lambda x: "TooManyRedirects" in _names(x)):
        return HubError(f"{at}: {endpoint} redirects in a loop (more than 20 redirects): check HF_ENDPOINT")
    connect = in_chain(exc, lambda x: bool({"ConnectError", "ProxyError"} & _names(x))
                       or isinstance(x, ConnectionError) and not isinstance(x, e.OfflineModeIsEnabled))
    if connect is not None:
        what = f"{lead}the Hub" if lead else f"{at}: the Hub"
        return HubUnavailableError(f"{what} ({endpoint}) cannot be reached ({type(connect).__name__}): check the "
                                   "network, or set HF_HUB_OFFLINE=1 to use the HF cache")
    if isinstance(exc, e.RemoteEntryNotFoundError):
        return NotFoundError(f"{at}: a file kvplan needs is missing from the repository")
    if isinstance(exc, e.HfHubHTTPError) and _status(exc) is not None:
        if _status(exc) == 401:
            return HubAccessError(f"{at}: the Hub refused the token in use (HF_TOKEN): invalid or expired")
        return HubError(f"{at}: the Hub answered HTTP {_status(exc)}")
    if in_chain(exc, lambda x: isinstance(x, e.FileMetadataError)):
        return HubError(f"{at}: {endpoint} does not answer like a Hugging Face Hub (check HF_ENDPOINT, proxies "
                        "and certificates)")
    if isinstance(exc, e.LocalEntryNotFoundError):
        return HubError(f"{at}: the file could not be downloaded and is not in the HF cache")
    if isinstance(exc, e.HFValidationError):
        return UsageError(f"'{repo}' is not a valid Hub model id")
    if _from_client(exc):  # garbage the client could not parse: wrong types, bad headers, broken encodings
        return HubError(f"{at}: {endpoint} gave an answer huggingface_hub cannot read ({type(exc).__name__}): "
                        "check HF_ENDPOINT")
    return None


def transient(exc: BaseException, w: Where) -> str | None:
    """What went wrong, if it was a server error (5xx / 429, after the retries) or a timeout."""
    from huggingface_hub.errors import HfHubHTTPError

    found = in_chain(exc, lambda x: isinstance(x, HfHubHTTPError) and (_status(x) or 0) in (429, 500, 502, 503, 504))
    if found is not None:
        tries = f"{w.tries} {'try' if w.tries == 1 else 'tries'}"
        return f"the Hub answered HTTP {_status(found)} after {tries}"
    found = in_chain(exc, lambda x: any("Timeout" in n for n in _names(x)) or isinstance(x, TimeoutError))
    if found is not None:
        return f"the Hub did not answer within KVPLAN_HUB_TIMEOUT ({w.timeout_s:g} s; timeout)"
    return None


def _close(repo: str, sep: str) -> str:
    from kvplan.sources.bundled import close_bundled

    close = close_bundled(repo)
    if not close:
        return ""
    return f"; did you mean {', '.join(close)}?" if sep == "; " else f" (did you mean {', '.join(close)}?)"
