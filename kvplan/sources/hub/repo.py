"""A Hub repository's file list (the model info) and its config file (through the HF cache)."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import ConfigError, HubError
from kvplan.record import dataclass
from kvplan.sources.hub.names import COMMIT
from kvplan.sources.hub.settings import HubSettings


@dataclass(frozen=True)
class RepoInfo:
    sha: str
    files: tuple[str, ...]


def model_info(repo: str, revision: str | None, settings: HubSettings) -> RepoInfo:
    """``GET /api/models/{repo}[/revision/{rev}]?expand=sha&expand=siblings``, read within bounds and checked.

    The request HfApi.model_info makes (hf_api.py), made here so that the answer is parsed by
    kvplan's bounded JSON reader and its types checked: a broken mirror's answer is one line.
    """
    from urllib.parse import quote

    from huggingface_hub import constants

    from kvplan.safe_io import decode_text, parse_json
    from kvplan.sources.hub.http import get

    url = f"{constants.ENDPOINT}/api/models/{repo}"
    if revision is not None:
        url += f"/revision/{quote(revision, safe='')}"
    body = get(url, settings, params={"expand": ["sha", "siblings"]})
    where = f"{repo}: the Hub's model info"
    try:
        data = parse_json(decode_text(body, where), where)
    except ConfigError as exc:
        raise HubError(f"{exc} (check HF_ENDPOINT)") from None
    sha = data.get("sha") if isinstance(data, dict) else None
    siblings = data.get("siblings") if isinstance(data, dict) else None
    if not (isinstance(sha, str) and COMMIT.match(sha)):
        raise HubError(f"{where} has no commit id (sha): the server does not answer like a Hugging Face Hub "
                       "(check HF_ENDPOINT)")
    if not (isinstance(siblings, list) and all(isinstance(s, dict) and isinstance(s.get("rfilename"), str)
                                               for s in siblings)):
        raise HubError(f"{where} has no valid file list (siblings): the server does not answer like a Hugging "
                       "Face Hub (check HF_ENDPOINT)")
    return RepoInfo(sha, tuple(s["rfilename"] for s in siblings))


def config_names(files: tuple[str, ...] | None, at: str) -> list[str]:
    """Which config file to read: config.json, else Mistral's params.json."""
    if files is None:  # offline: whichever the cache has
        return ["config.json", "params.json"]
    if "config.json" in files:
        return ["config.json"]
    if "params.json" in files:
        return ["params.json"]
    raise ConfigError(f"{at}: the repository has no config.json (nor a Mistral params.json): kvplan needs the "
                      "model's architecture")


def download(repo: str, filename: str, revision: str | None, settings: HubSettings) -> Path:
    """``filename`` in the HF cache (downloaded when online; huggingface_hub checks its ETag)."""
    from huggingface_hub import hf_hub_download

    from kvplan.sources.hub.http import ensure_hooks

    ensure_hooks()
    return Path(hf_hub_download(repo, filename, revision=revision or "main", etag_timeout=settings.timeout_s))


def read_config(path: Path, where: str) -> dict:
    """The JSON object of a cached config file (a regular file of at most 16 MiB)."""
    from kvplan.safe_io import read_json_object

    try:
        return read_json_object(path)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace(str(path), where, 1)) from None
