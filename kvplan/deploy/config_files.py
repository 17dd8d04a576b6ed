"""Engine config files a launch command names (TensorRT-LLM's ``--extra_llm_api_options extra.yaml``), read
where the deployment's own files hold them.

A path is read when it resolves to a file kvplan can see: relative to a shell script, through a compose bind
mount or ``configs:`` entry (host side relative to the compose file), or through a Kubernetes ``volumeMount`` of
a ``configMap`` volume whose ConfigMap is in the same manifest. Anything else (a path baked into the image, a
ConfigMap defined elsewhere) is left unread, and the engine's merge says so (``not-read``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

import posixpath
from collections.abc import Callable

from kvplan.deploy.deployment import Deployment, Value
from kvplan.engines.serve import serve_flags

#: a container path -> (the file's text, where it was found), or None when kvplan cannot see it
Resolver = Callable[[str], "tuple[str, str] | None"]


def attach(dep: Deployment, resolve: Resolver) -> None:
    """Replace each config-file setting's path by {path, data (the YAML mapping or None), error, source}."""
    serve = serve_flags(dep.engine)
    for key in serve.config_files if serve is not None else ():
        v = dep.settings.get(key)
        if v is None or isinstance(v.value, dict):
            continue
        path = str(v.value)
        entry: dict[str, Any] = {"path": path, "data": None, "error": None, "source": None}
        try:
            found = resolve(path)
        except Exception as exc:  # noqa: BLE001 - an unreadable file is reported, never a traceback
            found, entry["error"] = None, str(exc)
        if found is not None:
            text, entry["source"] = found
            entry["data"], entry["error"] = _load(text, found[1])
        dep.settings[key] = Value(entry, v.line, v.spelled, path)


def merge_settings(dep: Deployment) -> tuple[Deployment, list[Any]]:
    """The deployment with the settings its engine config files decide (TensorRT-LLM's extra_llm_api_options),
    merged by the engine's precedence rule (``ServeFlags.merge``), and the merge's remarks. A file the engine
    would refuse raises a KvplanError carrying the flag's line."""
    from kvplan.record import replace

    from kvplan.errors import KvplanError

    serve = serve_flags(dep.engine)
    keys = [k for k in (serve.config_files if serve is not None else ()) if k in dep.settings]
    if serve is None or serve.merge is None or not keys:
        return dep, []
    at = dep.line_of(keys[0])
    version = dep.engine_version.value if dep.engine_version else None
    try:
        merged = serve.merge({k: v.value for k, v in dep.settings.items()}, version)
    except KvplanError as exc:
        exc.line = at  # type: ignore[attr-defined]
        raise
    settings = dict(dep.settings)
    for key, value, spelled in merged.settings:
        settings[key] = Value(value, at, spelled, str(value))
    return replace(dep, settings=settings), list(merged.remarks)


def _load(text: str, where: str) -> tuple[Any, str | None]:
    from kvplan.errors import KvplanError
    from kvplan.safe_io import load_yaml

    try:
        data = load_yaml(text, where)  # bounded: size, depth, aliases (safe_io)
    except KvplanError as exc:
        return None, str(exc).removeprefix(f"{where}: ")
    return ({} if data is None else data), None


def relative_to(base_dir: str) -> Resolver:
    """Paths relative to the deployment file (a shell script run from its directory)."""

    def resolve(path: str) -> tuple[str, str] | None:
        if posixpath.isabs(path) or path.startswith("~") or "$" in path:
            return None
        return _read(base_dir, path)

    return resolve


def compose_mounts(svc: Any, data: Any, base_dir: str) -> Resolver:
    """A compose service's bind mounts (``./cfg:/cfg``, ``{type: bind, source, target}``) and ``configs:``."""
    mounts: list[tuple[str, str]] = []  # (container target, host source)
    inline: dict[str, tuple[str, str]] = {}  # container target -> (content, where)
    for entry in svc.get("volumes") or [] if isinstance(svc, dict) else []:
        if isinstance(entry, str):
            parts = entry.split(":")
            if len(parts) >= 2:
                mounts.append((parts[1], parts[0]))
        elif isinstance(entry, dict) and entry.get("type", "bind") == "bind" and entry.get("target"):
            mounts.append((str(entry["target"]), str(entry.get("source", ""))))
    top = data.get("configs") if isinstance(data, dict) else None
    for entry in svc.get("configs") or [] if isinstance(svc, dict) else []:
        name = entry if isinstance(entry, str) else entry.get("source") if isinstance(entry, dict) else None
        target = entry.get("target") if isinstance(entry, dict) else None
        spec = top.get(name) if isinstance(top, dict) and name is not None else None
        if isinstance(spec, dict) and spec.get("file"):
            mounts.append((str(target or f"/{name}"), str(spec["file"])))
        elif isinstance(spec, dict) and isinstance(spec.get("content"), str):  # compose 2.23+: inline content
            inline[str(target or f"/{name}")] = (spec["content"], f"configs.{name}.content")

    def resolve(path: str) -> tuple[str, str] | None:
        if path in inline:
            return inline[path]
        for target, source in mounts:
            if not (source.startswith((".", "/")) and "$" not in source):
                continue  # a named volume: its content is not here
            target = target.rstrip("/") or "/"
            if path == target:
                return _read(base_dir, source)
            if path.startswith(target + "/"):
                return _read(base_dir, source, path[len(target) + 1:])
        return None

    return resolve


def k8s_configmaps(container: Any, pod: Any, configmaps: dict[str, Any], manifest: str) -> Resolver:
    """Files a container sees through ``configMap`` volumes whose ConfigMap is in the same manifest."""
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, dict)}

    def resolve(path: str) -> tuple[str, str] | None:
        for mount in container.get("volumeMounts") or []:
            if not isinstance(mount, dict) or not isinstance(mount.get("mountPath"), str):
                continue
            source = (volumes.get(mount.get("name")) or {}).get("configMap")
            if not isinstance(source, dict) or source.get("name") not in configmaps:
                continue
            data = configmaps[source["name"]]
            files = {str(i.get("path")): str(i.get("key")) for i in source.get("items") or [] if isinstance(i, dict)}
            if not files:
                files = {str(k): str(k) for k in data}
            mount_path = mount["mountPath"].rstrip("/")
            sub = mount.get("subPath")
            if sub and path == mount_path and str(sub) in files:
                key = files[str(sub)]
            elif not sub and path.startswith(mount_path + "/") and path[len(mount_path) + 1:] in files:
                key = files[path[len(mount_path) + 1:]]
            else:
                continue
            if isinstance(data.get(key), str):
                return data[key], f"{manifest}: ConfigMap {source['name']} key {key}"
        return None

    return resolve


def _read(*parts: str) -> tuple[str, str] | None:
    """The text of the file the parts name joined (as ``Path(*parts)``), and its name; None where it is none."""
    from kvplan.safe_io import path_is_file, path_text, read_text

    path = path_text(*parts)
    if not path_is_file(path):
        return None
    return read_text(path), path
