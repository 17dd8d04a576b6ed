"""Ray Serve LLM configs (``serve run config.yaml`` / ``serve deploy``): the vLLM engines of their ``LLMConfig``\\ s.

Read from ray-project/ray ``python/ray/llm/_internal/serve``:

- A Serve config's ``applications[]`` whose ``import_path`` is a Ray Serve LLM builder take their configs from
  ``args``: ``llm_configs`` (``build_openai_app``), ``llm_config`` (``build_dp_openai_app``),
  ``prefill_config`` / ``decode_config`` (prefill-decode disaggregation). Each is a mapping or the path of a YAML
  file holding one; Ray opens the path from ``serve run``'s working directory, which kvplan does not know: it is
  looked for beside the config and in the directories above it (said in a note), else reported not read.
  A file that is one ``LLMConfig`` (``model_loading_config`` at the top) is read on its own too.
- ``engines/vllm/vllm_models.py`` ``VLLMEngineConfig``: the model is ``model_loading_config.model_source``
  where it is a string, else ``model_id``; ``engine_kwargs`` are ``AsyncEngineArgs`` fields, i.e. vLLM's
  ``--flag`` of the same name with dashes (``tensor_parallel_size`` -> ``--tensor-parallel-size``); a
  ``runtime_env.env_vars`` mapping is the engine's environment. Each replica takes ``tensor_parallel_size x
  pipeline_parallel_size`` GPUs (``num_devices``; ``placement_group_config.bundles``' GPUs where given), one
  per data-parallel rank with ``data_parallel_size``.
- ``accelerator_type`` is Ray's node label (``GPUType``): ``A100`` names no size (40 or 80 GB: both are
  checked), ``A100-40G`` / ``A100-80G`` do; likewise ``V100``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.detect import RAY_SERVE_BUILDERS
from kvplan.deploy.detect import ray_serve as detect_ray_serve
from kvplan.deploy.flags import FlagError, Token
from kvplan.deploy.helm import helm_text, run_command
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import dig, line_at
from kvplan.engines.serve import hosted_by
from kvplan.safe_io import path_stem

_BUILDERS = RAY_SERVE_BUILDERS
looks_like = detect_ray_serve  # told apart from other values in detect.py, without this module
#: Ray's accelerator labels (GPUType) -> catalog GPUs
_GPU_TYPES = {"a100": ("A100-SXM4-40GB", "A100-SXM4-80GB"), "a100-40g": ("A100-SXM4-40GB",),
              "a100-80g": ("A100-SXM4-80GB",), "v100": ("V100-SXM2-16GB", "V100-SXM2-32GB")}
_ARG_KEYS = ("llm_configs", "llm_config", "prefill_config", "decode_config")
_PARENTS = 4  # directories above the config where a relative LLMConfig path is looked for


def read(data: Any, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
    deployments: list[Deployment] = []
    findings: list[Finding] = []
    if isinstance(data.get("model_loading_config"), dict):
        _config(data, path_stem(path), path, base_dir, deployments, findings)
        return deployments, findings, 1
    apps = data["applications"]
    seen = 0
    for i, app in enumerate(apps):
        if not isinstance(app, dict) or not str(app.get("import_path", "")).startswith(_BUILDERS):
            continue
        args = app.get("args")
        app_name = str(app.get("name") or f"applications[{i}]")
        for key in _ARG_KEYS:
            value = args.get(key) if isinstance(args, dict) else None
            if value is None:
                continue
            items = value if key == "llm_configs" and isinstance(value, list) else [value]
            lines = list(getattr(value, "lines", [line_at(args, key)] * len(items))) if key == "llm_configs" \
                and isinstance(value, list) else [line_at(args, key)]
            for j, item in enumerate(items):
                seen += 1
                label = f"{app_name}/{key}" + (f"[{j}]" if key == "llm_configs" else "")
                config, where = _load(item, lines[j], path, base_dir, label, findings)
                if config is not None:
                    _config(config, label, where, base_dir, deployments, findings, at=lines[j],
                            app_env=dig(app, "runtime_env", "env_vars"))
    if not seen:
        findings.append(Finding("error", "no-serving-container", "no Ray Serve LLM application names an LLMConfig "
                                "(args.llm_configs, llm_config, prefill_config or decode_config)", path,
                                line_at(data, "applications"), invalid_input=True))
    return deployments, findings, seen


def _load(item: Any, line: int | None, path: str, base_dir: str, label: str,
          findings: list[Finding]) -> tuple[Any, str]:
    """An LLMConfig mapping, or the one a relative path names (looked for beside the config, then above it)."""
    if isinstance(item, dict):
        return item, path
    if not isinstance(item, str):
        findings.append(Finding("error", "invalid-input", "an LLMConfig is a mapping or a YAML file path",
                                path, line, deployment=label, invalid_input=True))
        return None, path
    import os

    from kvplan.deploy.yaml_lines import load_all
    from kvplan.errors import KvplanError

    # named as the user names the config (relative stays relative): base_dir, then each directory above it
    candidates = [Path(item)] if Path(item).is_absolute() else \
        [Path(os.path.normpath(Path(base_dir).joinpath(*[".."] * up, item))) for up in range(_PARENTS + 1)]
    for up, candidate in enumerate(candidates):
        if candidate.is_file():
            try:
                from kvplan.safe_io import read_text

                docs = load_all(read_text(str(candidate)), str(candidate))
            except KvplanError as exc:
                findings.append(Finding("error", "invalid-input", f"{item[:60]}: {exc}", path, line,
                                        deployment=label, invalid_input=True))
                return None, path
            data = next((d for d, _ in docs if d is not None), None)
            if not isinstance(data, dict):
                findings.append(Finding("error", "invalid-input", f"{item[:60]} holds no LLMConfig mapping",
                                        path, line, deployment=label, invalid_input=True))
                return None, path
            if up:  # not where the config is
                findings.append(Finding("note", "not-read", f"{item[:60]} read from {candidate} (Ray opens "
                                        "it from serve run's working directory)", path, line, deployment=label))
            return data, str(candidate)
    findings.append(Finding("error", "invalid-input", f"{item[:60]} not found beside this file or above it "
                            "(Ray opens it from serve run's working directory): kvplan cannot read the LLMConfig",
                            path, line, deployment=label, invalid_input=True))
    return None, path


def _config(config: Any, name: str, path: str, base_dir: str, deployments: list[Deployment],
            findings: list[Finding], *, at: int | None = None, app_env: Any = None) -> None:
    """One LLMConfig as ``VLLMEngineConfig.from_llm_config`` and ``get_initialization_kwargs`` turn it into vLLM's
    engine arguments."""
    loading = config.get("model_loading_config") if isinstance(config.get("model_loading_config"), dict) else {}
    line = at if at is not None else getattr(config, "line", None)
    dep = Deployment(name=name, file=path, line=line, source="ray-serve", base_dir=base_dir)
    source, model_id = loading.get("model_source"), loading.get("model_id")
    if isinstance(source, str):
        model, model_line, spelled = source, line_at(loading, "model_source"), "model_loading_config.model_source"
    else:
        model, model_line, spelled = model_id, line_at(loading, "model_id"), "model_loading_config.model_id"
        if isinstance(source, dict):  # a cloud mirror: the weights' id is not in the file
            dep.notes.append("model_loading_config.model_source is a cloud mirror: checked as model_id "
                             f"{str(model_id)[:40]}")
    kwargs = config.get("engine_kwargs") if isinstance(config.get("engine_kwargs"), dict) else {}
    argv = [Token(word, line) for word in hosted_by("ray-serve").serve_words]
    if model is not None:
        argv.append(Token(helm_text(model), model_line))
    try:
        for key, value in kwargs.items():
            if value is None or key in ("model", "served_model_name"):
                continue  # Ray refuses model / served_model_name in engine_kwargs
            kline = line_at(kwargs, key)
            flag = "--" + str(key).replace("_", "-")
            text = json.dumps(value) if isinstance(value, (dict, list)) else helm_text(value)
            argv.append(Token(f"{flag}={text}", kline))
        env: dict[str, tuple[str, int | None]] = {}
        for source_env in (app_env, dig(config, "runtime_env", "env_vars")):  # the config's own win
            if isinstance(source_env, dict):
                lines = getattr(source_env, "lines", {})
                env.update({str(k): (helm_text(v), lines.get(k)) for k, v in source_env.items() if v is not None})
        run_command(dep, argv, env, k8s=False)
    except FlagError as exc:
        findings.append(Finding("error", "invalid-input", str(exc), path, exc.line, deployment=name,
                                invalid_input=True))
        return
    if dep.model is not None:
        dep.model = Value(dep.model.value, dep.model.line, spelled, dep.model.raw)
    tp, pp, dp = (dep.setting(k, 1) for k in ("tp", "pp", "dp"))
    bundles = dig(config, "placement_group_config", "bundles")
    if isinstance(bundles, list) and bundles:
        total = 0.0
        for b in bundles:
            gpu = b.get("GPU", 1.0) if isinstance(b, dict) else 1.0  # BundleConfig.GPU defaults to 1.0
            if isinstance(gpu, bool) or not isinstance(gpu, (int, float)) or not 0 <= gpu <= 1 << 20:
                findings.append(Finding("error", "invalid-input", "placement_group_config bundle GPU "
                                        f"{helm_text(gpu)[:40]} is not a number of GPUs", path,
                                        line_at(config, "placement_group_config"), deployment=name,
                                        invalid_input=True))
                return
            total += gpu
        if total == int(total) and total > 0:
            dep.gpu_count = Value(int(total) * dp, line_at(config, "placement_group_config"),
                                  "placement_group_config.bundles GPUs" + (f" x {dp} data-parallel ranks" if dp > 1
                                                                           else ""))
    elif isinstance(tp, int) and isinstance(pp, int) and isinstance(dp, int):
        dep.gpu_count = Value(tp * pp * dp, dep.line_of("tp"), "tensor_parallel_size x pipeline_parallel_size"
                              + (" x data_parallel_size" if dp > 1 else "") + " (Ray's num_devices)")
    accel = config.get("accelerator_type")
    if accel is not None:
        aline = line_at(config, "accelerator_type")
        names = _GPU_TYPES.get(str(accel).lower(), (str(accel),))
        dep.gpus = [Value(n, aline, f"accelerator_type {str(accel)[:40]}") for n in names]
    deployments.append(dep)

