"""docker compose files: services whose command (or image entrypoint) runs an engine.

The GPU count comes from ``deploy.resources.reservations.devices`` (``count``, or the number of
``device_ids``); compose has no GPU type, so it comes from a ``kvplan/gpu`` label (or ``x-kvplan``
extension field, or ``--gpu``). ``${VAR}`` / ``${VAR:-default}`` are interpolated from the ``.env`` file
beside the compose file, as compose does; anything else stays unknown and is reported.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any


from kvplan.deploy.config_files import attach, compose_mounts
from kvplan.deploy.deployment import Deployment, Value, kvplan_annotations
from kvplan.deploy.flags import FlagError, Token, apply_invocation, find_invocation, image_server
from kvplan.deploy.pods import apply_annotations, image_version
from kvplan.deploy.report import Finding
from kvplan.deploy.host_memory import compose_limit
from kvplan.deploy.yaml_lines import dig, line_at


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("services"), dict) and "apiVersion" not in data


def dotenv(base_dir: str) -> dict[str, str]:
    from kvplan.safe_io import path_exists, path_text, read_text

    env: dict[str, str] = {}
    path = path_text(base_dir, ".env")
    if not path_exists(path):
        return env

    text = read_text(path)  # a .env that is there but unreadable (a pipe, not UTF-8) is an error
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def _tokens(value: Any, line: int | None, lines: Any) -> list[Token]:
    if isinstance(value, str):
        if "'" not in value and '"' not in value and "\\" not in value:  # no quote or escape: shlex.split splits
            return [Token(w, line) for w in value.replace("\t", " ").replace("\r", " ").replace("\n", " ").split(" ")
                    if w]  # on its blanks (space, tab, CR, LF) alone, which str.split() would widen to all Unicode
        import shlex  # only for a command with quotes or escapes

        try:
            return [Token(w, line) for w in shlex.split(value)]
        except ValueError:
            raise FlagError(f"cannot split the command '{value}' (unbalanced quotes)", line) from None
    if isinstance(value, list):
        ls = list(getattr(value, "lines", [line] * len(value)))
        return [Token(str(v), ls[i]) for i, v in enumerate(value)]
    return []


def read(data: Any, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
    env = dotenv(base_dir)
    deployments: list[Deployment] = []
    findings: list[Finding] = []
    services = data["services"]
    for name, svc in services.items():
        if not isinstance(svc, dict):
            continue
        entry = _tokens(svc.get("entrypoint"), line_at(svc, "entrypoint"), None)
        command = _tokens(svc.get("command"), line_at(svc, "command"), None)
        # compose interpolates ${VAR} in the whole file before anything runs
        from kvplan.deploy.flags import substitute

        argv = []
        for t in [*entry, *command]:
            text, _ = substitute(t.text.replace("$$", "\0"), env)
            argv.append(Token(text.replace("\0", "$"), t.line))
        implicit = image_server(svc.get("image")) if not entry else None
        try:
            # a `sh -c` script sees the container's environment too
            container_env = {k: value for k, (value, _) in _environment(svc, env).items()}
            inv = find_invocation(argv, {**env, **container_env}, implicit=implicit)
        except FlagError as exc:
            findings.append(Finding("error", "invalid-input", f"service {name}: {exc}", path, exc.line,
                                    deployment=str(name), invalid_input=True))
            continue
        if inv is None:
            continue
        inv.environment = {**_environment(svc, env), **{k: v for k, v in inv.environment.items() if v[1] is not None}}
        dep = Deployment(name=str(name), file=path, line=line_at(services, name), source="compose", base_dir=base_dir)
        apply_invocation(dep, inv)
        attach(dep, compose_mounts(svc, data, base_dir))  # --extra_llm_api_options through a bind mount
        version = image_version(svc.get("image"), inv.engine)
        dep.image = svc["image"] if isinstance(svc.get("image"), str) else None
        if version:
            dep.engine_version = Value(version, line_at(svc, "image"), "image tag")
        dep.host_memory = compose_limit(svc)  # pinned offload tiers vs the memory limit
        count, count_line = gpu_count(svc)
        dep.devices = device_ids(svc)
        if count is not None:
            dep.gpu_count = Value(count, count_line, "GPU device reservation")
        notes = kvplan_annotations(svc.get("labels"))
        ext = svc.get("x-kvplan")
        if isinstance(ext, dict):
            notes.update(kvplan_annotations({f"kvplan/{str(k).replace('_', '-')}": v for k, v in ext.items()}))
            notes = {k: (v[0], v[1] if v[1] is not None else line_at(svc, "x-kvplan"), v[2]) for k, v in notes.items()}
        apply_annotations(dep, notes)
        deployments.append(dep)
    return deployments, findings, len(services)


def _environment(svc: Any, env: dict[str, str]) -> dict[str, tuple[str, int | None]]:
    """The service's ``environment`` (a mapping or ``NAME=value`` list), interpolated like the rest of the file:
    name -> (value, line). The ``.env`` file only feeds interpolation; it is not the container's environment."""
    from kvplan.deploy.flags import substitute

    out: dict[str, tuple[str, int | None]] = {}
    section = svc.get("environment")
    if isinstance(section, dict):
        items = [(str(k), v, line_at(svc, "environment", k)) for k, v in section.items()]
    elif isinstance(section, list):
        lines = list(getattr(section, "lines", [None] * len(section)))
        items = [(str(e).partition("=")[0], str(e).partition("=")[2], lines[i])
                 for i, e in enumerate(section) if isinstance(e, str) and "=" in e]
    else:
        return out
    for name, value, line in items:
        if value is None:
            continue
        text, missing = substitute(str(value).replace("$$", "\0"), env)
        if not missing:
            out[name.strip()] = (text.replace("\0", "$"), line)
    return out


def gpu_count(svc: Any) -> tuple[int | None, int | None]:
    devices = dig(svc, "deploy", "resources", "reservations", "devices")
    for i, d in enumerate(devices if isinstance(devices, list) else []):
        if not isinstance(d, dict):
            continue
        caps = d.get("capabilities") or []
        if d.get("driver") not in (None, "nvidia") and "gpu" not in caps:
            continue
        if isinstance(d.get("count"), int):
            return d["count"], line_at(devices, i, "count")
        if isinstance(d.get("device_ids"), list):
            return len(d["device_ids"]), line_at(devices, i, "device_ids")
        return None, line_at(devices, i)
    return None, None


def device_ids(svc: Any) -> Value | None:
    """The GPUs a service is pinned to (``device_ids`` of its GPU reservation): services naming the same ones share
    them. A ``count`` alone pins nothing (the runtime picks)."""
    devices = dig(svc, "deploy", "resources", "reservations", "devices")
    for i, d in enumerate(devices if isinstance(devices, list) else []):
        if isinstance(d, dict) and isinstance(d.get("device_ids"), list) and d["device_ids"]:
            return Value(tuple(sorted(str(x) for x in d["device_ids"])), line_at(devices, i, "device_ids"),
                         "device_ids")
    return None
