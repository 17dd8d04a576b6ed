"""Helm values of the vLLM production stack: one deployment per ``servingEngineSpec.modelSpec[]``.

Read: ``modelURL``, ``requestGPU`` (x nothing: one replica's GPUs), ``vllmConfig`` (``maxModelLen``,
``tensorParallelSize``, ``pipelineParallelSize``, ``maxNumSeqs``, ``gpuMemoryUtilization``,
``maxNumBatchedTokens``, ``kvCacheDtype``, then ``extraArgs`` as vLLM flags, which come last on the
command line and so win), ``nodeSelectorTerms`` / ``affinity`` for the GPU type, ``annotations`` for
``kvplan/...`` keys, ``tag`` for the vLLM version. Entries with ``enabled: false`` are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.deploy.deployment import Deployment, Value, kvplan_annotations
from kvplan.deploy.flags import FlagError, Token, _parse, apply_invocation, convert
from kvplan.deploy.k8s import _apply_annotations, labels_from_terms
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import dig, line_at
from kvplan.engines.serve import serve_flags

_CONFIG = {"maxModelLen": "max_model_len", "tensorParallelSize": "tp", "pipelineParallelSize": "pp",
           "maxNumSeqs": "max_num_seqs", "gpuMemoryUtilization": "gpu_memory_utilization",
           "maxNumBatchedTokens": "max_num_batched_tokens", "kvCacheDtype": "kv_cache_dtype",
           "blockSize": "block_size"}


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("servingEngineSpec"), dict)


def read(data: Any, path: str, base_dir: Path) -> tuple[list[Deployment], list[Finding], int]:
    specs = dig(data, "servingEngineSpec", "modelSpec")
    deployments: list[Deployment] = []
    findings: list[Finding] = []
    if not isinstance(specs, list):
        return deployments, findings, 0
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict) or spec.get("enabled") is False:
            continue
        name = str(spec.get("name") or f"modelSpec[{i}]")
        dep = Deployment(name=name, file=path, line=line_at(specs, i), source="helm", base_dir=base_dir)
        if spec.get("modelURL") is not None:
            dep.model = Value(str(spec["modelURL"]), line_at(spec, "modelURL"), "modelURL")
        tag = spec.get("tag")
        if isinstance(tag, str):
            from kvplan.deploy.k8s import image_version

            version = image_version(f"vllm:{tag}", "vllm")
            if version:
                dep.engine_version = Value(version, line_at(spec, "tag"), "tag")
        if spec.get("requestGPU") is not None:
            try:
                dep.gpu_count = Value(int(str(spec["requestGPU"])), line_at(spec, "requestGPU"), "requestGPU")
            except ValueError:
                pass
        config = spec.get("vllmConfig") if isinstance(spec.get("vllmConfig"), dict) else {}
        try:
            for key, setting in _CONFIG.items():
                if config.get(key) is not None:
                    line = line_at(config, key)
                    dep.settings[setting] = Value(convert(setting, str(config[key]), f"vllmConfig.{key}", line),
                                                  line, f"vllmConfig.{key}", str(config[key]))
            extra = config.get("extraArgs")
            if isinstance(extra, list):
                lines = list(getattr(extra, "lines", [None] * len(extra)))
                # the production-stack chart runs vllm serve with these extra arguments
                serve = serve_flags("vllm")
                assert serve is not None
                inv = _parse(serve, serve.default_launcher, [], [Token(str(a), lines[j]) for j, a in enumerate(extra)],
                             {}, False, line_at(config, "extraArgs"))
                model = dep.model
                apply_invocation(dep, inv)
                dep.model = dep.model or model
        except FlagError as exc:
            findings.append(Finding("error", "invalid-input", f"{name}: {exc}", path, exc.line, deployment=name,
                                    invalid_input=True))
            continue
        terms = spec.get("nodeSelectorTerms")
        labels = labels_from_terms(dig(spec, "affinity", "nodeAffinity",
                                       "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")) \
            or labels_from_terms(terms)
        dep.gpus = [Value(v, line, key) for v, line, key in labels]
        _apply_annotations(dep, kvplan_annotations(spec.get("annotations")))
        deployments.append(dep)
    return deployments, findings, len(specs)
