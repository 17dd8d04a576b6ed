"""Read one model from the Hub: the steps in order, each bounded, every failure one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError, HubError, KvplanError, UsageError
from kvplan.sources.hub.names import COMMIT, looks_like_hub_id
from kvplan.sources.hub.settings import HubSettings
from kvplan.spec import ModelSpec


def load_hub_model(repo_id: str, revision: str | None = None, *, fallback: bool = False) -> ModelSpec:
    """The ModelSpec of Hub model ``repo_id`` at ``revision`` (default: main).

    ``fallback``: the Hub is tried because ``repo_id`` is no file and no bundled model (rather than
    asked for with --hub / a revision); errors that leave open whether the model exists say so.
    """
    if not looks_like_hub_id(repo_id):
        raise UsageError(f"'{repo_id}' is not a Hugging Face Hub model id (expected org/name)")
    read = _Read(repo_id, revision, fallback)
    try:
        with read.progress:
            return read.run()
    except KvplanError as exc:
        from kvplan.sources.hub.http import AnswerRefused

        if isinstance(exc, AnswerRefused):  # raised inside the client: add which model
            raise HubError(f"{read.at}: {exc} ({read.where().endpoint})") from None
        raise
    except Exception as exc:  # huggingface_hub / HTTP errors become one line
        from kvplan.sources.hub.errors import explain

        mapped = explain(exc, read.where())
        if mapped is None:
            raise
        raise mapped from None


class _Read:
    """One model being read: its settings, the steps, and what a message needs to say."""

    def __init__(self, repo: str, revision: str | None, fallback: bool) -> None:
        from huggingface_hub import constants

        from kvplan.sources.hub.progress import Progress

        self.constants = constants
        self.repo, self.revision, self.fallback = repo, revision, fallback
        self.at = f"{repo}@{revision}" if revision else repo
        self.offline = bool(constants.HF_HUB_OFFLINE)
        self.settings = HubSettings.from_env()
        self.tries = self.settings.tries  # of the step under way (1 where nothing is retried)
        self.progress = Progress(f"Reading {self.at} from the Hugging Face Hub ({self.where().endpoint})")

    def where(self) -> Any:
        from kvplan.sources.hub.errors import Where, shown_endpoint

        return Where(self.repo, self.revision, shown_endpoint(self.constants.ENDPOINT), str(self.constants.HF_HUB_CACHE),
                     self.offline, self.fallback, self.tries, self.settings.timeout_s)

    def step(self, text: str) -> None:
        self.progress.update(f"Hub: {self.at}: {text}")

    def run(self) -> ModelSpec:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

        from kvplan.sources.hub.http import bounded

        from huggingface_hub.utils import logging as hf_logging

        bars_were_off = are_progress_bars_disabled()
        disable_progress_bars()  # kvplan shows its own status; hf's bars would clutter stderr
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # nor its retry warnings: the outcome is one line
        try:
            with bounded(self.settings):
                return self._run()
        finally:
            hf_logging.set_verbosity(verbosity)
            if not bars_were_off:
                enable_progress_bars()

    def _run(self) -> ModelSpec:
        from kvplan.sources.hub import record as rec
        from kvplan.sources.hub.build import build_spec
        from kvplan.sources.hub.headers import summarize_headers
        from kvplan.sources.hub.mistral import config_from_mistral_params
        from kvplan.sources.hub.repo import config_names, model_info, read_config

        files: tuple[str, ...] | None = None
        if not self.offline:
            self.step("repository information")
            files = model_info(self.repo, self.revision, self.settings).files
        config_file, path = self._config(config_names(files, self.at))
        sha = path.parent.name if COMMIT.match(path.parent.name) else None
        if sha is None:
            raise HubError(f"{self.at}: the HF cache returned {path}, not a snapshot of a commit")
        where = f"{self.repo}@{sha[:12]}/{config_file}"
        config = read_config(path, where)
        notes: list[str] = []
        if config_file == "params.json":
            config = config_from_mistral_params(config, where, notes)
        record, cached = rec.read_record(self.repo, sha), True
        if record is None and files is not None:
            self.tries = self.settings.tries
            record = summarize_headers(self.repo, sha, list(files), config, self.settings, rec.RECORD_FORMAT, self.step)
            cached = False
            rec.write_record(self.repo, sha, record)
        return build_spec(self.repo, sha, config, config_file, record, from_cache=cached,
                          record_path=rec.record_path(self.repo, sha), notes=notes)

    def _config(self, names: list[str]) -> tuple[str, Path]:
        """The config file, downloaded into the HF cache (or found there when offline)."""
        from huggingface_hub.errors import EntryNotFoundError

        from kvplan.sources.hub.repo import download

        self.tries = 1  # hf_hub_download asks once, then falls back to the cache
        first: Exception | None = None
        for name in names:
            self.step(name)
            try:
                return name, download(self.repo, name, self.revision, self.settings)
            except EntryNotFoundError as exc:  # includes "not in the local cache" when offline
                first = first or exc
        if first is None:  # pragma: no cover - names is never empty
            raise ConfigError(f"{self.at}: no config file")
        raise first
