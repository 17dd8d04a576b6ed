"""Read a model from the Hugging Face Hub: its config and the headers of its safetensors files.

What is downloaded (docs/sources.md):

1. the repository's commit and file list (``model_info`` with ``expand=[sha, siblings]``);
2. ``config.json`` (or a Mistral ``params.json``) through ``hf_hub_download``, into the HF cache;
3. the JSON header of each safetensors weight file, by two range requests per file (its 8-byte
   length, then exactly the header): never a byte of the weights. huggingface_hub's own
   ``get_safetensors_metadata`` is not used because it asks for the first 100 KB of every file,
   which for most shards is mostly weight data, and downloads the index file as well.

The headers' summary (bytes and element counts by dtype, per file) is stored by kvplan under
``$HF_HOME/kvplan/safetensors/models--<org>--<name>/<commit>.json``: huggingface_hub caches files,
not parsed headers. With ``HF_HUB_OFFLINE=1`` the config comes from the HF cache and the weights
from that summary, so a model estimated once online gives the same answer offline.

huggingface_hub reads ``HF_TOKEN``, ``HF_HOME``, ``HF_HUB_CACHE``, ``HF_HUB_OFFLINE`` and
``HF_ENDPOINT`` itself (at import time). kvplan's own settings: ``KVPLAN_HUB_TIMEOUT`` (seconds per
request, default 10), ``KVPLAN_HUB_TRIES`` (attempts on server errors and timeouts, default 3) and
``KVPLAN_HUB_RETRY_DELAY`` (first back-off delay in seconds, doubled each retry, default 1).

Every failure becomes a one-line :class:`~kvplan.errors.KvplanError` (exit status 2); the token is
never printed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from kvplan.errors import (
    ConfigError,
    HubAccessError,
    HubError,
    HubUnavailableError,
    KvplanError,
    NotFoundError,
    OfflineError,
    UsageError,
)
from kvplan.spec import ModelSpec

T = TypeVar("T")

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
RECORD_FORMAT = 1
_SHARD = re.compile(r"^(?P<prefix>.+?)-(?P<index>\d+)-of-(?P<count>\d+)\.safetensors$")


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` (or a bare ``name`` when ``bare``): what the Hub accepts as a model id."""
    return bool(HUB_ID.match(name)) and "--" not in name and ".." not in name and not name.endswith(".")


def split_revision(name: str) -> tuple[str, str | None]:
    """``org/name@rev`` -> (``org/name``, ``rev``); without ``@``, (name, None)."""
    repo, at, rev = name.partition("@")
    if not at:
        return name, None
    if not rev:
        raise UsageError(f"'{name}': nothing after '@' (expected org/name@revision)")
    return repo, rev


def _setting(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"{name}={value!r} is not a number") from None
    if number < 0:
        raise UsageError(f"{name}={value!r} is negative")
    return number


# ------------------------------------------------------------------------------------------------
# Entry point


def load_hub_model(repo_id: str, revision: str | None = None, *, fallback: bool = False) -> ModelSpec:
    """The ModelSpec of Hub model ``repo_id`` at ``revision`` (default: main).

    ``fallback``: the Hub is tried because ``repo_id`` is no file and no bundled model (rather than
    asked for with --hub / a revision); errors that leave open whether the model exists say so.
    """
    if not looks_like_hub_id(repo_id):
        raise UsageError(f"'{repo_id}' is not a Hugging Face Hub model id (expected org/name)")
    session = _HubSession(repo_id, revision, fallback)
    try:
        with session.progress:
            return session.load()
    except KvplanError:
        raise
    except Exception as exc:  # huggingface_hub / httpx errors become one line
        mapped = session.explain(exc)
        if mapped is None:
            raise
        raise mapped from None


class _Progress:
    """A rich status line on stderr while the Hub is read, only when stderr is a terminal."""

    def __init__(self, text: str) -> None:
        self.status = None
        if sys.stderr.isatty():
            from rich.console import Console

            self.status = Console(stderr=True).status(text)

    def update(self, text: str) -> None:
        if self.status is not None:
            self.status.update(text)

    def __enter__(self) -> _Progress:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()


class _HubSession:
    """One model being read: the settings, the steps, and the error messages."""

    def __init__(self, repo_id: str, revision: str | None, fallback: bool = False) -> None:
        from huggingface_hub import constants

        self.fallback = fallback
        self.constants = constants
        self.repo = repo_id
        self.revision = revision
        self.at = f"{repo_id}@{revision}" if revision else repo_id
        self.offline = bool(constants.HF_HUB_OFFLINE)
        self.timeout = _setting("KVPLAN_HUB_TIMEOUT", 10.0) or None
        self.tries = max(int(_setting("KVPLAN_HUB_TRIES", 3)), 1)
        self.delay = _setting("KVPLAN_HUB_RETRY_DELAY", 1.0)
        self.attempts = 0
        self.progress = _Progress(f"Reading {self.at} from the Hugging Face Hub ({constants.ENDPOINT})")

    # ----------------------------------------------------------------------------------------
    # Steps

    def load(self) -> ModelSpec:
        from huggingface_hub.utils import (
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )

        bars_were_off = are_progress_bars_disabled()
        disable_progress_bars()  # kvplan shows its own status; hf's bars would clutter stderr
        try:
            return self._load()
        finally:
            if not bars_were_off:
                enable_progress_bars()

    def _load(self) -> ModelSpec:
        files: list[str] | None = None
        if not self.offline:
            self.progress.update(f"Hub: {self.at}: repository information")
            info = self.retry(lambda: self._model_info())
            files = [s.rfilename for s in (info.siblings or [])]
        config_file, path = self._config(files)
        sha = path.parent.name if COMMIT.match(path.parent.name) else None
        if sha is None:
            raise HubError(f"{self.at}: the HF cache returned {path}, not a snapshot of a commit")
        config = self._read_json(path, config_file, sha)
        notes: list[str] = []
        if config_file == "params.json":
            config = config_from_mistral_params(config, f"{self.repo}@{sha[:12]}/params.json", notes)

        record, cached = _read_record(self.repo, sha), True
        if record is None and files is not None:
            record, cached = self._summarize(sha, files, config), False
            _write_record(self.repo, sha, record)
        return build_spec(self.repo, sha, config, config_file, record, from_cache=cached,
                          record_path=_record_path(self.repo, sha), notes=notes)

    def _model_info(self) -> Any:
        from huggingface_hub import HfApi

        return HfApi().model_info(self.repo, revision=self.revision, expand=["sha", "siblings"],
                                  timeout=self.timeout)

    def _config(self, files: list[str] | None) -> tuple[str, Path]:
        """Which config file the repo has, downloaded (or found in the cache when offline)."""
        from huggingface_hub.errors import EntryNotFoundError

        if files is not None:
            top = set(files)
            if "config.json" in top:
                names = ["config.json"]
            elif "params.json" in top:
                names = ["params.json"]
            else:
                raise ConfigError(f"{self.at}: the repository has no config.json (nor a Mistral params.json): "
                                  "kvplan needs the model's architecture")
        else:
            names = ["config.json", "params.json"]
        first: Exception | None = None
        for name in names:
            self.progress.update(f"Hub: {self.at}: {name}")
            try:
                return name, Path(self.retry(lambda name=name: self._download(name)))
            except EntryNotFoundError as exc:  # includes "not in the local cache" when offline
                first = first or exc
        assert first is not None
        raise first

    def _download(self, filename: str) -> str:
        from huggingface_hub import hf_hub_download

        return hf_hub_download(self.repo, filename, revision=self.revision or "main",
                               etag_timeout=self.timeout or 10.0)

    def _read_json(self, path: Path, name: str, sha: str) -> dict:
        where = f"{self.repo}@{sha[:12]}/{name}"
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{where}: not UTF-8 text") from None
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read the cached file ({exc.strerror or exc})") from None
        from kvplan.sources.hf_config import parse_json_object

        return parse_json_object(text, where)

    def _summarize(self, sha: str, files: list[str], config: dict) -> dict[str, Any]:
        """Read every weight file's header (two range requests each) and summarize it."""
        from concurrent.futures import ThreadPoolExecutor

        from huggingface_hub.utils import build_hf_headers

        from kvplan.sources.safetensors_weights import quant_scheme, summarize_header

        shards, why = pick_safetensors(files)
        record: dict[str, Any] = {"format": RECORD_FORMAT, "repo": self.repo, "commit": sha, "files": None,
                                  "reason": why}
        if not shards:
            return record
        scheme = quant_scheme(config)
        headers = build_hf_headers()
        done = [0]

        def one(filename: str) -> dict[str, Any]:
            tensors = self.retry(lambda: self._header(sha, filename, headers))
            done[0] += 1
            self.progress.update(f"Hub: {self.at}: safetensors headers {done[0]}/{len(shards)}")
            return summarize_header(tensors, scheme, f"{self.repo}@{sha[:12]}/{filename}")

        self.progress.update(f"Hub: {self.at}: safetensors headers 0/{len(shards)}")
        with ThreadPoolExecutor(max_workers=min(8, len(shards))) as pool:
            summaries = list(pool.map(one, shards))
        record["files"] = dict(zip(shards, summaries))
        return record

    def _header(self, sha: str, filename: str, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
        from huggingface_hub import hf_hub_url

        from kvplan.sources.safetensors_weights import header_length, parse_header

        where = f"{self.repo}@{sha[:12]}/{filename}"
        url = hf_hub_url(self.repo, filename, revision=sha)
        size = header_length(self._range(url, 0, 8, headers), where)
        raw = self._range(url, 8, size, headers)
        if len(raw) < size:
            raise ConfigError(f"{where}: truncated safetensors header ({len(raw)} of {size} bytes)")
        return parse_header(raw, where)

    def _range(self, url: str, start: int, length: int, headers: dict[str, str]) -> bytes:
        """``length`` bytes of ``url`` from ``start``; stops reading if the server ignores Range."""
        from huggingface_hub.utils import get_session, hf_raise_for_status

        request_headers = {**headers, "Range": f"bytes={start}-{start + length - 1}", "Accept-Encoding": "identity"}
        with get_session().stream("GET", url, headers=request_headers, timeout=self.timeout) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            skip = start if response.status_code == 200 else 0  # Range ignored: the whole file comes
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= skip + length:
                    break
        return bytes(body[skip:skip + length])

    # ----------------------------------------------------------------------------------------
    # Retries and errors

    def retry(self, action: Callable[[], T]) -> T:
        """Run ``action``; server errors (5xx, 429) and timeouts are retried with exponential back-off."""
        for attempt in range(self.tries):
            try:
                self.attempts = max(self.attempts, attempt + 1)
                return action()
            except Exception as exc:
                if attempt + 1 >= self.tries or _transient(exc) is None:
                    raise
                self.progress.update(f"Hub: {self.at}: {_transient(exc)}; retrying")
                time.sleep(self.delay * 2 ** attempt)
        raise AssertionError("unreachable")

    def explain(self, exc: Exception) -> KvplanError | None:
        """A one-line kvplan error for a huggingface_hub / network failure (None: not ours to explain)."""
        from huggingface_hub import errors as e
        from huggingface_hub.utils import get_token

        token = get_token() is not None
        repo, at = self.repo, self.at
        if isinstance(exc, e.GatedRepoError):
            who = "the token in use (HF_TOKEN) has no access" if token else "no token is set"
            return HubAccessError(f"{repo} is a gated model and {who}: accept its conditions on "
                                  f"{self.constants.ENDPOINT}/{repo} and set HF_TOKEN to a token with access")
        if isinstance(exc, e.RevisionNotFoundError):
            return NotFoundError(f"revision '{self.revision or 'main'}' of {repo} does not exist on the Hub")
        if isinstance(exc, e.DisabledRepoError):
            return HubAccessError(f"{repo}: access to this repository is disabled on the Hub")
        if isinstance(exc, e.RepositoryNotFoundError):
            if token:
                return HubAccessError(f"{repo} was not found on the Hub, or it is private and the token in use "
                                      "(HF_TOKEN) has no access to it")
            from kvplan.sources.resolve import close_bundled

            close = close_bundled(repo)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            return NotFoundError(f"'{repo}' is not a file or a bundled model, and the Hub has no public model "
                                 f"by that id (a private one needs HF_TOKEN set to a token with access){hint}")
        lead = ""
        if self.fallback:
            from kvplan.sources.resolve import close_bundled

            close = close_bundled(repo)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            lead = f"'{repo}' is not a file or a bundled model{hint}, and "
        if self.offline and isinstance(exc, (e.OfflineModeIsEnabled, e.LocalEntryNotFoundError)):
            return OfflineError(f"{lead}HF_HUB_OFFLINE is set and {at} is not in the HF cache "
                                f"({self.constants.HF_HUB_CACHE}): run kvplan once online, or pin the model "
                                f"with `kvplan spec {repo} > spec.yaml` and estimate that file")
        why = _transient(exc)
        if why is not None:
            tries = f"{self.attempts} {'try' if self.attempts == 1 else 'tries'}"
            return HubUnavailableError(f"{at}: {why} after {tries} ({self.constants.ENDPOINT}); try again later, "
                                       "or set HF_HUB_OFFLINE=1 to use the HF cache")
        connect = _in_chain(exc, lambda x: type(x).__name__ in ("ConnectError", "ProxyError")
                            or isinstance(x, ConnectionError) and not isinstance(x, e.OfflineModeIsEnabled))
        if connect is not None:
            what = f"{lead}the Hub" if lead else f"{at}: the Hub"
            return HubUnavailableError(f"{what} ({self.constants.ENDPOINT}) cannot be reached "
                                       f"({type(connect).__name__}): check the network, or set HF_HUB_OFFLINE=1 "
                                       "to use the HF cache")
        if isinstance(exc, e.RemoteEntryNotFoundError):
            return NotFoundError(f"{at}: a file kvplan needs is missing from the repository")
        if isinstance(exc, e.HfHubHTTPError) and exc.response is not None:
            code = exc.response.status_code
            if code == 401:
                return HubAccessError(f"{at}: the Hub refused the token in use (HF_TOKEN): invalid or expired")
            return HubError(f"{at}: the Hub answered HTTP {code}")
        if isinstance(exc, e.FileMetadataError):
            return HubError(f"{at}: {self.constants.ENDPOINT} does not answer like a Hugging Face Hub "
                            "(check HF_ENDPOINT, proxies and certificates)")
        if isinstance(exc, e.LocalEntryNotFoundError):
            return HubError(f"{at}: the file could not be downloaded and is not in the HF cache")
        if isinstance(exc, e.HFValidationError):
            return UsageError(f"'{repo}' is not a valid Hub model id")
        if isinstance(exc, (OSError, ValueError)) and type(exc).__module__.startswith(("httpx", "huggingface_hub")):
            return HubError(f"{at}: {type(exc).__name__} while reading from the Hub")
        return None


def _in_chain(exc: BaseException, test: Callable[[BaseException], bool]) -> BaseException | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if test(current):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _transient(exc: BaseException) -> str | None:
    """What went wrong, if it is worth retrying: a 5xx / 429 answer or a timeout."""
    from huggingface_hub.errors import HfHubHTTPError

    def server(x: BaseException) -> bool:
        response = getattr(x, "response", None) if isinstance(x, HfHubHTTPError) else None
        return response is not None and (response.status_code >= 500 or response.status_code == 429)

    found = _in_chain(exc, server)
    if found is not None:
        return f"the Hub answered HTTP {found.response.status_code}"  # type: ignore[attr-defined]
    found = _in_chain(exc, lambda x: "Timeout" in type(x).__name__ or isinstance(x, TimeoutError))
    if found is not None:
        return "the Hub did not answer in time (timeout)"
    return None


# ------------------------------------------------------------------------------------------------
# Which files hold the weights


def pick_safetensors(files: list[str]) -> tuple[list[str], str | None]:
    """The top-level safetensors files holding the model's weights, or ([], why not)."""
    top = sorted(f for f in files if "/" not in f and f.endswith(".safetensors"))
    if not top:
        return [], "the repository has no safetensors weight files"
    groups: dict[tuple[str, bool], list[str]] = {}
    declared: dict[str, int] = {}
    for name in top:
        m = _SHARD.match(name)
        if m:
            groups.setdefault((m["prefix"], True), []).append(name)
            declared[m["prefix"]] = int(m["count"])
        else:
            groups.setdefault((name.removesuffix(".safetensors"), False), []).append(name)
    for key in (("model", True), ("model", False), ("consolidated", False), ("consolidated", True)):
        if key in groups:
            chosen = key
            break
    else:
        if len(groups) != 1:
            names = ", ".join(sorted(g[0] for g in groups))
            return [], f"several safetensors sets ({names}) and none is model.safetensors"
        chosen = next(iter(groups))
    shards = groups[chosen]
    if chosen[1] and len(shards) not in (declared[chosen[0]], declared[chosen[0]] + 1):
        return [], f"{chosen[0]}-*-of-{declared[chosen[0]]:05d}.safetensors is incomplete ({len(shards)} files)"
    return shards, None


# ------------------------------------------------------------------------------------------------
# kvplan's record of a commit's headers


def _record_path(repo: str, sha: str) -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "kvplan" / "safetensors" / ("models--" + repo.replace("/", "--")) / f"{sha}.json"


def _read_record(repo: str, sha: str) -> dict[str, Any] | None:
    path = _record_path(repo, sha)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(data, dict) and data.get("format") == RECORD_FORMAT and data.get("commit") == sha
            and (data.get("files") is None or isinstance(data.get("files"), dict))):
        return None
    return data


def _write_record(repo: str, sha: str, record: dict[str, Any]) -> None:
    path = _record_path(repo, sha)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs the headers again next time


# ------------------------------------------------------------------------------------------------
# The spec


def build_spec(repo: str, sha: str, config: dict, config_file: str, record: dict[str, Any] | None, *,
               from_cache: bool, record_path: Path, notes: list[str]) -> ModelSpec:
    """The ModelSpec of ``config``, with weights from the header record (or counted from the config)."""
    from kvplan.sources.hf_config import spec_from_config

    where = f"{repo}@{sha[:12]}/{config_file}"
    try:
        spec = spec_from_config(config, model_id=repo, source=repo)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    assumptions = [*notes, *spec.assumptions]
    params = w_bytes = None
    w_dtype = w_source = None
    if record is not None and record.get("files"):
        from kvplan.sources.safetensors_weights import (
            combine,
            quant_scheme,
            weights_dtype,
        )

        scheme = quant_scheme(config)
        weights = combine(record["files"], scheme)
        params, w_bytes = weights.params or None, weights.bytes or None
        w_dtype = weights_dtype(weights, scheme)
        w_source = (f"safetensors headers of {repo}@{sha} ({weights.files} "
                    f"{'file' if weights.files == 1 else 'files'}, {weights.tensors:,} tensors)")
        assumptions += weights.notes
        if from_cache:
            assumptions.append(f"weights: from kvplan's summary of the safetensors headers of {repo}@{sha[:12]}, "
                               f"cached in {record_path}")
    else:
        if record is not None:
            why = f"{record.get('reason') or 'no safetensors weight files'} ({repo}@{sha[:12]})"
        else:
            why = (f"kvplan has no cached summary of the safetensors headers of {repo}@{sha[:12]} "
                   "(HF_HUB_OFFLINE is set)")
        params, w_bytes, w_dtype, how, more = _analytic(config)
        if params is not None:
            w_source = f"computed from {config_file} of {repo}@{sha}, not the checkpoint: {how}"
            assumptions.append(f"weights: {why}: params and weights_bytes are an analytic count from {config_file}")
            assumptions += [f"weights: {a}" for a in more]
        else:
            assumptions.append(f"weights: {why}, and {how}: weights unknown")
    return replace(spec, revision=sha, params=params, weights_bytes=w_bytes, weights_dtype=w_dtype,
                   weights_source=w_source, assumptions=tuple(dict.fromkeys(assumptions)))


def _analytic(config: dict) -> tuple[int | None, int | None, str | None, str, tuple[str, ...]]:
    from kvplan.sources.hf_params import count_params, weights_bytes
    from kvplan.sources.safetensors_weights import quant_scheme

    try:
        count = count_params(config)
        nbytes, how = weights_bytes(config, count)
    except ConfigError as exc:
        return None, None, None, f"the config cannot be counted ({exc})", ()
    scheme = quant_scheme(config)
    dtype = scheme.name
    if dtype is None:
        from kvplan.sources.hf_params import _checkpoint_dtype

        dtype = _checkpoint_dtype(config)[0]
    return count.total, nbytes, dtype, how, count.assumptions


# ------------------------------------------------------------------------------------------------
# Mistral's params.json


def config_from_mistral_params(params: dict, where: str, notes: list[str]) -> dict:
    """A transformers-style config for Mistral's native ``params.json`` (dense and MoE decoders).

    Fields: dim, n_layers, n_heads, n_kv_heads, head_dim, hidden_dim, vocab_size, norm_eps,
    rope_theta, sliding_window, max_seq_len / max_position_embeddings, moe {num_experts,
    num_experts_per_tok}. Anything else that changes the cache (an MLA latent, a Mamba mixer) is
    refused: such repos also ship a config.json, which kvplan reads first.
    """
    missing = [k for k in ("dim", "n_layers", "n_heads") if not isinstance(params.get(k), int)]
    if missing:
        raise ConfigError(f"{where}: not a Mistral params.json kvplan can read (no {', '.join(missing)})")
    unknown = [k for k in ("kv_lora_rank", "q_lora_rank", "mla", "ssm", "mamba", "model_type") if k in params]
    if unknown:
        raise ConfigError(f"{where}: params.json with {', '.join(unknown)}: kvplan reads params.json only for "
                          "dense and mixture-of-experts decoders; pass a config.json")
    config: dict[str, Any] = {
        "model_type": "mistral",
        "hidden_size": params["dim"],
        "num_hidden_layers": params["n_layers"],
        "num_attention_heads": params["n_heads"],
        "num_key_value_heads": params.get("n_kv_heads") or params["n_heads"],
        "head_dim": params.get("head_dim") or params["dim"] // params["n_heads"],
        "intermediate_size": params.get("hidden_dim"),
        "vocab_size": params.get("vocab_size"),
        "rms_norm_eps": params.get("norm_eps", 1e-5),
        "rope_theta": params.get("rope_theta", 10000.0),
        "sliding_window": params.get("sliding_window"),
        "tie_word_embeddings": bool(params.get("tied_embeddings", False)),
        "torch_dtype": "bfloat16",
    }
    positions = params.get("max_position_embeddings") or params.get("max_seq_len")
    if positions:
        config["max_position_embeddings"] = positions
    else:
        notes.append(f"{where} declares no max_seq_len: max_position_embeddings unknown")
    moe = params.get("moe")
    if isinstance(moe, dict):
        config["model_type"] = "mixtral"
        config["num_local_experts"] = moe.get("num_experts")
        config["num_experts_per_tok"] = moe.get("num_experts_per_tok")
    notes.append(f"read from {where} (Mistral's native format: no config.json); dtype assumed bfloat16")
    if isinstance(params.get("vision_encoder"), dict):
        notes.append(f"{where}: the vision encoder is not counted; the text decoder is read")
    return {k: v for k, v in config.items() if v is not None}
