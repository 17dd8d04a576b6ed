"""kvplan's own deployment file: one or more deployments with their requirements.

```yaml
version: 1
deployments:
  - name: chat
    model: meta-llama/Llama-3.1-8B        # a bundled id, a Hub id, or {path: spec.yaml} / {spec: {...}}
    gpu: {type: L4, count: 1}              # or gpu: L4 (one GPU); or {memory: 47.5GiB, count: 2}
    engine: {name: vllm, version: "0.11", tp: 1, max_model_len: 32k, max_num_seqs: 64}
    requirements: {min_concurrency: 16, at_context: 8k, min_context: 32k, headroom: 10%, shared_prefix: 2k, n: 1}
```

Validated by pydantic (the models: ``kvplan.deploy.kvplan_models``; files they accept as written are read by
``kvplan.deploy.kvplan_fast`` without importing pydantic; ``kvplan schema deployment`` prints the JSON schema); each problem becomes one
finding with its line. Counts take ``32k`` (k = 1024, as kvplan's command line does).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any


from kvplan.deploy import kvplan_fast
from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import line_at
from kvplan.engines import PACKAGE_ENGINES

# The pydantic models live in kvplan.deploy.kvplan_models, imported only when a file of this kind is one the
# pydantic-free reader (kvplan_fast) leaves to them, or its schema is printed.


SETTING_KEYS = ("tp", "pp", "dp", "max_model_len", "max_num_seqs", "gpu_memory_utilization", "kv_cache_dtype",
                "max_num_batched_tokens", "block_size", "enforce_eager", "mem_fraction_static",
                "free_gpu_memory_fraction", "kv_cache_memory", "weights_bytes")
"""The engine keys read as kvplan's own settings (every engine has them)."""
NOT_FLAGS = frozenset(("name", "version", *SETTING_KEYS))
"""Engine keys that are no engine's own flag (tests/test_patterns_by_hand.py holds them apart from ``_file_flags``)."""


def _file_flags() -> tuple[str, ...]:
    """The engine keys a file passes as the engine's own flags (``Setting.file_key`` in every engine's table of
    settings, engines/<engine>/settings.py): refused for an engine whose launch command has no such flag."""
    from kvplan.engines import get_engine
    from kvplan.engines.settings import settings_of

    keys = (s.file_key for name in PACKAGE_ENGINES for s in settings_of(get_engine(name)) if s.file_key)
    return tuple(dict.fromkeys(keys))


def _engine_flags(engine: Any, given: set[str], settings: dict[str, Value],
                  line: Any) -> tuple[str, int | None] | None:
    """The engine's own flag settings into ``settings``; (message, line) for one the engine does not have."""
    if given <= NOT_FLAGS:  # no engine flag given: every engine's table of settings is left unread (~2 ms of a start)
        return None
    from kvplan.engines.serve import serve_flags

    serve = serve_flags(engine.name)
    known = {key for _, key in serve.flags} if serve is not None else set()
    for key in _file_flags():
        value = getattr(engine, key)
        if key not in given or value is None:
            continue
        if key not in known:
            return f"engine.{key}: {engine.name} has no such setting", line(key)
        settings[key] = Value(value, line(key), f"engine.{key}")
    return None


def schema() -> dict[str, Any]:
    from kvplan.deploy.kvplan_models import DeploymentFile

    data = DeploymentFile.model_json_schema()
    data["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    data["title"] = "kvplan deployment file"
    return data


def _clean_loc(loc: Any) -> list[Any]:
    return [p for p in loc if not (isinstance(p, str) and (p in ("str", "ModelRef", "GpuSpec", "EngineSpec")
                                                           or p.startswith(("literal[", "function-"))))]


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and "deployments" in data and "apiVersion" not in data


def _validate(data: Any, path: str) -> tuple[Any, list[Finding]]:
    """(the file as the models validate it, []) or (None, one finding per problem). A file the pydantic-free
    reader is sure of never imports pydantic; any other is validated, and its problems worded, by the models."""
    parsed = kvplan_fast.read(data)
    if parsed is not None:
        return parsed, []
    from pydantic import ValidationError

    from kvplan.deploy.kvplan_models import DeploymentFile

    try:
        return DeploymentFile.model_validate(data), []
    except ValidationError as exc:
        findings = []
        cleaned = [(err, tuple(_clean_loc(err["loc"]))) for err in exc.errors()]
        # a union reports every branch: keep the deepest errors (the branch the input meant)
        kept = [(e, loc) for e, loc in cleaned
                if not any(o[:len(loc)] == loc and len(o) > len(loc) for _, o in cleaned)]
        for err, loc in kept:
            where = ".".join(str(p) for p in loc) or "file"
            msg = err["msg"].removeprefix("Value error, ")
            findings.append(Finding("error", "invalid-input", f"{where}: {msg}", path, line_at(data, *loc),
                                    invalid_input=True))
        # a union reports each branch: keep one finding per line and location
        unique = {(f.line, f.message.split(":")[0]): f for f in reversed(findings)}
        return None, list(reversed(list(unique.values())))


def read(data: Any, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding]]:
    parsed, problems = _validate(data, path)
    if parsed is None:
        return [], problems
    out = []
    for i, d in enumerate(parsed.deployments):
        at = ("deployments", i)
        dep = Deployment(name=d.name, file=path, line=line_at(data, *at), source="kvplan", base_dir=base_dir)
        if isinstance(d.model, str):
            dep.model = Value(d.model, line_at(data, *at, "model"), "model")
        elif d.model.spec is not None:
            dep.model = Value(d.model.spec, line_at(data, *at, "model", "spec"), "model.spec")
        else:
            ref = d.model.id if d.model.id is not None else d.model.path
            key = "id" if d.model.id is not None else "path"
            dep.model = Value(ref, line_at(data, *at, "model", key),
                              f"model.{key}")
        gpu = kvplan_fast.defaults(kvplan_fast.GPU, type=d.gpu) if isinstance(d.gpu, str) else d.gpu
        gpu_line = line_at(data, *at, "gpu")
        if gpu.type is not None:
            dep.gpus.append(Value(gpu.type, line_at(data, *at, "gpu", "type") if not isinstance(d.gpu, str)
                                  else gpu_line, "gpu.type"))
        else:
            dep.gpus.append(Value({"memory": gpu.memory}, line_at(data, *at, "gpu", "memory"), "gpu.memory"))
        dep.gpu_count = Value(gpu.count, line_at(data, *at, "gpu", "count") if not isinstance(d.gpu, str)
                              else gpu_line, "gpu.count")
        if gpu.devices is not None:
            dep.devices = Value(tuple(sorted(str(x) for x in gpu.devices)), line_at(data, *at, "gpu", "devices"),
                                "gpu.devices")
        engine = kvplan_fast.defaults(kvplan_fast.ENGINE, name=d.engine) if isinstance(d.engine, str) else d.engine
        dep.engine = engine.name
        if engine.version is not None:
            dep.engine_version = Value(engine.version, line_at(data, *at, "engine", "version"), "engine.version")
        given = engine.model_fields_set if not isinstance(d.engine, str) else set()
        for key in SETTING_KEYS:
            if key in given and getattr(engine, key) is not None:
                dep.settings[key] = Value(getattr(engine, key), line_at(data, *at, "engine", key), f"engine.{key}")
        bad = _engine_flags(engine, given, dep.settings, lambda key: line_at(data, *at, "engine", key))
        if bad is not None:
            return [], [Finding("error", "invalid-input", bad[0], path, bad[1], deployment=d.name, invalid_input=True)]
        req = d.requirements
        for key in req.model_fields_set:
            value = getattr(req, key)
            if value is not None:
                dep.requirements[key] = Value(value, line_at(data, *at, "requirements", key), f"requirements.{key}")
        out.append(dep)
    return out, []
