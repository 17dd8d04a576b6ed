"""Every request kvplan makes of the Hub, bounded in time and in bytes.

kvplan uses huggingface_hub's own client (its shared session, token, endpoint and proxies) and its
own retry with back-off (``http_backoff``). What huggingface_hub leaves unbounded, kvplan bounds
while it reads a model (:func:`bounded`): two hooks on huggingface_hub's session

- refuse any answer once the read's deadline has passed, and a ``Retry-After`` (or rate-limit
  reset) that would sleep past it: ``http_backoff`` honours either without a limit;
- refuse a commit id or an ETag that is not a plain hash: huggingface_hub names cache files after
  them, and ``../..`` there makes it write outside the HF cache;
- wrap every answer's body, ``hf_hub_download``'s included, so that it ends within the request's
  timeout and holds at most :data:`~kvplan.sources.hub.settings.MAX_ANSWER_BYTES` once decoded
  (gzip and deflate are decoded here, with that bound; other encodings are not asked for).

Outside a kvplan read the hooks do nothing, and they are removed when the read ends.
"""

from __future__ import annotations

import importlib
import re
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from kvplan.errors import HubError
from kvplan.record import dataclass
from kvplan.sources.hub.settings import MAX_ANSWER_BYTES, RETRY_STATUS, HubSettings


class AnswerRefused(HubError):
    """An answer broke a bound (size, time, a retry delay); the message says which, without the repo."""


@dataclass(frozen=True)
class _Limits:
    timeout_s: float
    deadline: float  # time.monotonic()
    max_bytes: int
    deadline_s: float


_active: _Limits | None = None
_readers = 0  # reads under way (threads of one program): the hooks stay until the last one ends
_lock = threading.Lock()


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB"


@contextmanager
def bounded(settings: HubSettings, *, max_bytes: int = MAX_ANSWER_BYTES) -> Iterator[None]:
    """Bound every Hub answer while the block runs (one kvplan read at a time per process)."""
    global _active, _readers
    with _lock:
        _active = _Limits(settings.timeout_s, time.monotonic() + settings.deadline_s, max_bytes,
                          settings.deadline_s)
        _readers += 1
    try:
        ensure_hooks()
        yield
    finally:
        with _lock:
            _readers -= 1
            last = _readers == 0
            if last:
                _active = None
        if last:
            _remove_hooks()


def ensure_hooks() -> Any:
    """huggingface_hub's session with kvplan's hooks (a session closed after an error comes back bare)."""
    from huggingface_hub.utils import get_session

    session = get_session()
    hooks = session.event_hooks
    if _on_response not in hooks.get("response", []):
        session.event_hooks = {**hooks, "request": [*hooks.get("request", []), _on_request],
                               "response": [*hooks.get("response", []), _on_response]}
    return session


def _remove_hooks() -> None:
    from huggingface_hub.utils import get_session

    session = get_session()
    hooks = session.event_hooks
    session.event_hooks = {key: [h for h in value if h not in (_on_request, _on_response)]
                           for key, value in hooks.items()}


# ------------------------------------------------------------------------------------------------
# The hooks


def _on_request(request: Any) -> None:
    limits = _active
    if limits is None:
        return
    if limits.deadline <= time.monotonic():
        raise AnswerRefused("the Hub did not finish answering within KVPLAN_HUB_DEADLINE "
                            f"({_seconds(limits)} s for the whole read)")
    wanted = request.headers.get("accept-encoding")
    if wanted is not None and wanted.strip().lower() != "identity":
        request.headers["Accept-Encoding"] = "gzip, deflate"  # the encodings decoded below with a bound


def _seconds(limits: _Limits) -> str:
    return f"{limits.deadline_s:g}"


def _on_response(response: Any) -> None:
    limits = _active
    if limits is None:
        return
    left = limits.deadline - time.monotonic()
    if left <= 0:
        raise AnswerRefused(f"the Hub did not finish answering within KVPLAN_HUB_DEADLINE ({_seconds(limits)} s "
                            "for the whole read)")
    if response.status_code in RETRY_STATUS:
        wait = _asked_wait(response.headers)
        if wait is not None and wait > left:
            raise AnswerRefused(f"the Hub answered HTTP {response.status_code} and asks to wait {wait:,} s before "
                                f"trying again, past KVPLAN_HUB_DEADLINE")
    _check_names(response.headers)
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip", "deflate", "x-gzip"):
        raise AnswerRefused(f"the Hub answered in '{encoding[:40]}' encoding, which kvplan did not ask for")
    if encoding not in ("", "identity"):  # decoded by the bounded stream instead of by the client
        del response.headers["content-encoding"]
        if "content-length" in response.headers:  # the compressed length: no longer the body's
            del response.headers["content-length"]
    stream_class = _stream_class(type(response).__module__.split(".")[0])
    response.stream = stream_class(response.stream, time.monotonic() + min(limits.timeout_s, left),
                                   limits.timeout_s, limits.max_bytes, encoding)


_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_ETAG = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _check_names(headers: Any) -> None:
    """huggingface_hub names cache files after X-Repo-Commit and the ETag: a server sending ``../..``
    there makes hf_hub_download write outside the HF cache (seen with huggingface_hub 2.4)."""
    commit = headers.get("x-repo-commit")
    if commit is not None and not _COMMIT.match(commit.strip()):
        raise AnswerRefused("the Hub answered with a commit id that is not 40 hex digits (X-Repo-Commit)")
    for name in ("x-linked-etag", "etag"):
        value = headers.get(name)
        if value is None:
            continue
        tag = value.strip().removeprefix("W/").strip('"')
        if not _ETAG.match(tag) or tag in (".", ".."):
            raise AnswerRefused(f"the Hub answered with an ETag that is not a plain hash ({name})")


def _asked_wait(headers: Any) -> int | None:
    """The seconds a Retry-After or a rate-limit reset asks to wait (what http_backoff would sleep)."""
    value = headers.get("retry-after", "").strip()
    waits = [int(value) if len(value) <= 9 else 10**9] if value.isdigit() else []  # int() refuses 4,300+ digits
    try:
        from huggingface_hub.utils import parse_ratelimit_headers

        info = parse_ratelimit_headers(headers)
    except (ImportError, ValueError):
        info = None
    if info is not None and info.remaining == 0:
        waits.append(int(info.reset_in_seconds))
    return max(waits) if waits else None


@lru_cache(maxsize=4)
def _stream_class(module: str) -> type:
    """A body stream of the client's own HTTP library (httpx for huggingface_hub 1.x, httpx2 after)."""
    base = importlib.import_module(module).SyncByteStream

    class BoundedStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, until: float, timeout_s: float, max_bytes: int, encoding: str) -> None:
            self.inner, self.until, self.timeout_s, self.max_bytes = inner, until, timeout_s, max_bytes
            self.decoder = zlib.decompressobj(47) if encoding in ("gzip", "x-gzip") else \
                zlib.decompressobj() if encoding == "deflate" else None

        def __iter__(self) -> Iterator[bytes]:
            got = 0
            for chunk in self.inner:
                if time.monotonic() > self.until:
                    raise AnswerRefused(f"an answer did not end within KVPLAN_HUB_TIMEOUT ({self.timeout_s:g} s)")
                if self.decoder is not None:
                    chunk = self._decode(chunk, got)
                got += len(chunk)
                if got > self.max_bytes:
                    raise AnswerRefused(f"an answer larger than {_mib(self.max_bytes)}, more than kvplan reads")
                yield chunk
            if self.decoder is not None:
                yield self.decoder.flush(self.max_bytes - got + 1)[: self.max_bytes - got + 1]

        def _decode(self, chunk: bytes, got: int) -> bytes:
            try:
                out = self.decoder.decompress(chunk, self.max_bytes - got + 1)
            except zlib.error:
                raise AnswerRefused("an answer whose compressed body is invalid") from None
            if self.decoder.unconsumed_tail:
                raise AnswerRefused(f"an answer larger than {_mib(self.max_bytes)} once decompressed")
            return out

        def close(self) -> None:
            self.inner.close()

    return BoundedStream


# ------------------------------------------------------------------------------------------------
# Requests


def _backoff_args(settings: HubSettings) -> dict[str, Any]:
    # 5xx and 429 are asked again with huggingface_hub's back-off; a timeout or a dropped connection
    # is not: a Hub that did not answer in KVPLAN_HUB_TIMEOUT seconds is reported at once.
    return {"max_retries": settings.tries - 1, "base_wait_time": settings.retry_delay_s,
            "max_wait_time": max(settings.retry_delay_s * 8, settings.retry_delay_s),
            "retry_on_exceptions": (), "retry_on_status_codes": RETRY_STATUS, "timeout": settings.timeout_s}


def get(url: str, settings: HubSettings, *, params: dict[str, Any] | None = None) -> bytes:
    """The body of a GET of ``url`` (retried on 5xx / 429); an error status raises huggingface_hub's error."""
    from huggingface_hub.utils import (
        build_hf_headers,
        hf_raise_for_status,
        http_backoff,
    )

    ensure_hooks()
    response = http_backoff("GET", url, headers=build_hf_headers(), params=params, **_backoff_args(settings))
    hf_raise_for_status(response)
    return response.content


def get_range(url: str, start: int, length: int, settings: HubSettings, headers: dict[str, str]) -> bytes:
    """``length`` bytes of ``url`` from ``start``; stops reading if the server ignores the Range."""
    from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

    ensure_hooks()
    wanted = {**headers, "Range": f"bytes={start}-{start + length - 1}", "Accept-Encoding": "identity"}
    with http_stream_backoff("GET", url, headers=wanted, **_backoff_args(settings)) as response:
        if response.status_code >= 400:
            response.read()  # bounded by the hooks; hf_raise_for_status reads the error body
            hf_raise_for_status(response)
        skip = start if response.status_code == 200 else 0  # Range ignored: the whole file comes
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) >= skip + length:
                break
    return bytes(body[skip:skip + length])
