"""Read a model from the Hugging Face Hub: its config and the headers of its safetensors files.

What is downloaded (docs/sources.md):

1. the repository's commit and file list (``/api/models/{repo}?expand=sha&expand=siblings``);
2. ``config.json`` (or a Mistral ``params.json``) through ``hf_hub_download``, into the HF cache;
3. the JSON header of each safetensors weight file, by two range requests per file.

With ``HF_HUB_OFFLINE=1`` the config comes from the HF cache and the weights from kvplan's summary
of the headers, so a model estimated once online gives the same answer offline. Every request is
bounded in time and bytes (``http``); every failure is one line (``errors``); the token is never
printed.

One module per job:

- ``names``: what a model id and a revision look like;
- ``settings``: ``KVPLAN_HUB_*`` settings and the caps on what one answer may hold;
- ``http``: the bounded requests (huggingface_hub's session and retry, with kvplan's bounds);
- ``repo``: the file list and the config file;
- ``headers``: which files hold the weights, and their headers;
- ``record``: kvplan's cache of the headers' summary;
- ``mistral``: Mistral's native ``params.json``;
- ``build``: the ModelSpec; ``load``: the steps in order; ``errors``: the messages.
"""

from __future__ import annotations

from kvplan.sources.hub.build import build_spec
from kvplan.sources.hub.headers import pick_safetensors
from kvplan.sources.hub.load import load_hub_model
from kvplan.sources.hub.mistral import config_from_mistral_params
from kvplan.sources.hub.names import COMMIT, HUB_ID, looks_like_hub_id, split_revision

__all__ = ["COMMIT", "HUB_ID", "build_spec", "config_from_mistral_params", "load_hub_model", "looks_like_hub_id",
           "pick_safetensors", "split_revision"]
