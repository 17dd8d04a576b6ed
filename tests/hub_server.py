"""A small Hugging Face Hub on 127.0.0.1 for the tests: the endpoints huggingface_hub calls.

- ``GET /api/models/{repo}[/revision/{rev}]``: model info (sha, siblings), as the Hub answers it.
- ``HEAD|GET /{repo}/resolve/{rev}/{file}``: a file, with ``X-Repo-Commit``, ``ETag``,
  ``Content-Length``, ``Accept-Ranges`` and ``Range`` answers (206 + ``Content-Range``).
- Errors the way the Hub sends them (status + ``X-Error-Code``): 401 GatedRepo, 401/404 RepoNotFound,
  404 RevisionNotFound, 404 EntryNotFound; injected 503s and slow answers.

Repos are described in ``tests/data/hub/repos.json``; configs are fixture files; safetensors files
are built here from the config: a real header (real tensor names, dtypes, shapes and data_offsets)
whose data part is not stored. The server counts every body byte it sends and records every range
asked of a safetensors file, so a test can check that no weight byte was requested.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

HUB_DATA = Path(__file__).parent / "data" / "hub"
TOKEN = "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"
BITS = {"BF16": 16, "F16": 16, "F32": 32, "F8_E4M3": 8, "I32": 32, "U8": 8, "I8": 8}


# ------------------------------------------------------------------------------------------------
# safetensors files


@dataclass
class Safetensors:
    """A safetensors file of which only the 8-byte length and the JSON header are stored."""

    prefix: bytes  # 8-byte header length + header
    size: int  # the whole file's size, data included

    @property
    def header_end(self) -> int:
        return len(self.prefix)


def safetensors_file(tensors: list[tuple[str, str, list[int]]]) -> Safetensors:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        n = math.prod(shape) * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes
    prefix = len(raw).to_bytes(8, "little") + raw
    return Safetensors(prefix, len(prefix) + offset)


def nbytes(t: tuple[str, str, list[int]]) -> int:
    return math.prod(t[2]) * BITS[t[1]] // 8


def shard(tensors: list[tuple[str, str, list[int]]], count: int, first: int = 1) -> dict[str, Safetensors]:
    """Split ``tensors`` in order into ``count`` files of about equal size, named like save_pretrained."""
    if count == 1:
        return {"model.safetensors": safetensors_file(tensors)}
    target = sum(nbytes(t) for t in tensors) / count
    parts: list[list] = [[]]
    size = 0
    for t in tensors:
        if size >= target * len(parts) and len(parts) < count:
            parts.append([])
        parts[-1].append(t)
        size += nbytes(t)
    assert len(parts) == count, (len(parts), count)
    last = count - 1 if first == 0 else count
    return {f"model-{i + first:05d}-of-{last:05d}.safetensors": safetensors_file(p) for i, p in enumerate(parts)}


def _linear(name: str, out: int, n_in: int, quant: str | None, dtype: str) -> list[tuple[str, str, list[int]]]:
    if quant == "fp8":  # block 128 x 128, float32 inverse scales (Qwen3-*-FP8, DeepSeek-V3)
        return [(f"{name}.weight", "F8_E4M3", [out, n_in]),
                (f"{name}.weight_scale_inv", "F32", [math.ceil(out / 128), math.ceil(n_in / 128)])]
    if quant == "awq":  # AutoAWQ GEMM: qweight [in, out/8] int32, group 128
        return [(f"{name}.qweight", "I32", [n_in, out // 8]), (f"{name}.qzeros", "I32", [n_in // 128, out // 8]),
                (f"{name}.scales", "F16", [n_in // 128, out])]
    return [(f"{name}.weight", dtype, [out, n_in])]


def llama_tensors(cfg: dict, quant: str | None = None) -> list[tuple[str, str, list[int]]]:
    """The checkpoint tensors of a llama / qwen2 / qwen3 decoder, in save_pretrained order."""
    dtype = "F16" if quant == "awq" else "BF16"
    h, n = cfg["hidden_size"], cfg["num_hidden_layers"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or h // heads
    inter, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    qkv_bias = cfg["model_type"] == "qwen2"
    qk_norm = cfg["model_type"] == "qwen3"
    out = [("model.embed_tokens.weight", dtype, [vocab, h])]
    for i in range(n):
        p = f"model.layers.{i}"
        for proj, rows in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
            out += _linear(f"{p}.self_attn.{proj}", rows, h, quant, dtype)
            if qkv_bias:
                out.append((f"{p}.self_attn.{proj}.bias", dtype, [rows]))
        out += _linear(f"{p}.self_attn.o_proj", h, heads * hd, quant, dtype)
        if qk_norm:
            out += [(f"{p}.self_attn.q_norm.weight", dtype, [hd]), (f"{p}.self_attn.k_norm.weight", dtype, [hd])]
        out += _linear(f"{p}.mlp.gate_proj", inter, h, quant, dtype)
        out += _linear(f"{p}.mlp.up_proj", inter, h, quant, dtype)
        out += _linear(f"{p}.mlp.down_proj", h, inter, quant, dtype)
        out += [(f"{p}.input_layernorm.weight", dtype, [h]), (f"{p}.post_attention_layernorm.weight", dtype, [h])]
    out.append(("model.norm.weight", dtype, [h]))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", dtype, [vocab, h]))
    return out


def gpt_oss_tensors(cfg: dict) -> list[tuple[str, str, list[int]]]:
    """gpt-oss's MXFP4 checkpoint: expert weights as U8 *_blocks [E, out, in/32, 16] + *_scales [E, out, in/32]."""
    h, n, e = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_local_experts"]
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inter, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    out = [("model.embed_tokens.weight", "BF16", [vocab, h])]
    for i in range(n):
        p = f"model.layers.{i}"
        for proj, rows, cols in (("q_proj", heads * hd, h), ("k_proj", kv * hd, h), ("v_proj", kv * hd, h),
                                 ("o_proj", h, heads * hd)):
            out += [(f"{p}.self_attn.{proj}.weight", "BF16", [rows, cols]), (f"{p}.self_attn.{proj}.bias", "BF16", [rows])]
        out.append((f"{p}.self_attn.sinks", "BF16", [heads]))
        out += [(f"{p}.mlp.router.weight", "BF16", [e, h]), (f"{p}.mlp.router.bias", "BF16", [e])]
        for proj, rows, cols in (("gate_up_proj", 2 * inter, h), ("down_proj", h, inter)):
            out += [(f"{p}.mlp.experts.{proj}_blocks", "U8", [e, rows, cols // 32, 16]),
                    (f"{p}.mlp.experts.{proj}_scales", "U8", [e, rows, cols // 32]),
                    (f"{p}.mlp.experts.{proj}_bias", "BF16", [e, rows])]
        out += [(f"{p}.input_layernorm.weight", "BF16", [h]), (f"{p}.post_attention_layernorm.weight", "BF16", [h])]
    out += [("model.norm.weight", "BF16", [h]), ("lm_head.weight", "BF16", [vocab, h])]
    return out


def mistral_consolidated_tensors(params: dict) -> list[tuple[str, str, list[int]]]:
    """Mistral's native consolidated.safetensors names (tok_embeddings, layers.N.attention.wq, ...)."""
    h, n, heads, kv = params["dim"], params["n_layers"], params["n_heads"], params["n_kv_heads"]
    hd, inter, vocab = params["head_dim"], params["hidden_dim"], params["vocab_size"]
    out = [("tok_embeddings.weight", "BF16", [vocab, h])]
    for i in range(n):
        p = f"layers.{i}"
        out += [(f"{p}.attention.wq.weight", "BF16", [heads * hd, h]), (f"{p}.attention.wk.weight", "BF16", [kv * hd, h]),
                (f"{p}.attention.wv.weight", "BF16", [kv * hd, h]), (f"{p}.attention.wo.weight", "BF16", [h, heads * hd]),
                (f"{p}.feed_forward.w1.weight", "BF16", [inter, h]), (f"{p}.feed_forward.w2.weight", "BF16", [h, inter]),
                (f"{p}.feed_forward.w3.weight", "BF16", [inter, h]),
                (f"{p}.attention_norm.weight", "BF16", [h]), (f"{p}.ffn_norm.weight", "BF16", [h])]
    out += [("norm.weight", "BF16", [h]), ("output.weight", "BF16", [vocab, h])]
    return out


# ------------------------------------------------------------------------------------------------
# Repos


@dataclass
class Repo:
    id: str
    commits: dict[str, dict[str, bytes | Safetensors]]  # sha -> files
    refs: dict[str, str]  # branch / tag -> sha
    gated: bool = False
    private: bool = False
    fail: int = 0  # answer this many requests with fail_status first
    fail_status: int = 503
    delay: float = 0.0


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def load_repos() -> dict[str, Repo]:
    """The repos of ``tests/data/hub/repos.json``."""
    repos = {}
    for entry in json.loads((HUB_DATA / "repos.json").read_text()):
        refs: dict[str, str] = {}
        commits: dict[str, dict[str, bytes | Safetensors]] = {}
        for ref, rev in entry.get("revisions", {"main": {}}).items():
            config_text = (HUB_DATA / (rev.get("config") or entry["config"])).read_bytes()
            sha = _sha(entry["id"] + ref)
            refs[ref] = sha
            config_name = entry.get("config_file", "config.json")
            files: dict[str, bytes | Safetensors] = {config_name: config_text, "README.md": b"# fixture\n",
                                                      "generation_config.json": b"{}\n"}
            layout = entry.get("layout")
            if layout is not None:
                cfg = json.loads(config_text)
                if layout == "llama":
                    tensors = llama_tensors(cfg, entry.get("quant"))
                elif layout == "gpt_oss":
                    tensors = gpt_oss_tensors(cfg)
                elif layout == "mistral_consolidated":
                    tensors = mistral_consolidated_tensors(cfg)
                else:
                    raise ValueError(layout)
                if layout == "mistral_consolidated":
                    files["consolidated.safetensors"] = safetensors_file(tensors)
                else:
                    files.update(shard(tensors, entry.get("shards", 1), entry.get("first_shard", 1)))
                    if entry.get("shards", 1) > 1:
                        files["model.safetensors.index.json"] = b'{"metadata": {}, "weight_map": {}}'
            for extra in entry.get("extra_files", []):
                files[extra] = b"\0" * 64
            commits[sha] = files
        repos[entry["id"]] = Repo(entry["id"], commits, refs, gated=entry.get("gated", False),
                                  private=entry.get("private", False), fail=entry.get("fail", 0),
                                  delay=entry.get("delay", 0.0))
    return repos


# ------------------------------------------------------------------------------------------------
# The server


@dataclass
class Served:
    method: str
    path: str
    status: int
    body_bytes: int
    range: tuple[int, int] | None = None


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=load_repos)
    log: list[Served] = field(default_factory=list)
    weight_data_requests: list[str] = field(default_factory=list)  # ranges past a header, whole-file GETs
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.log.clear()
            self.weight_data_requests.clear()
            self.repos = load_repos()

    def bytes_served(self) -> int:
        return sum(s.body_bytes for s in self.log)

    def requested(self, suffix: str) -> list[Served]:
        return [s for s in self.log if s.path.endswith(suffix)]


_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    # ----------------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, *, head: bool = False,
              length: int | None = None, rng: tuple[int, int] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        sent = 0 if head else len(body)
        if not head:
            self.wfile.write(body)
        with self.fake.lock:
            self.fake.log.append(Served(self.command, urlsplit(self.path).path, status, sent, rng))

    def _error(self, status: int, code: str | None, message: str, head: bool, extra: dict[str, str] | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers, head=head)

    def _authorized(self) -> bool:
        return self.headers.get("Authorization", "") == f"Bearer {TOKEN}"

    def _serve(self, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        api = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/(.+))?$", path)
        resolve = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        repo_id = (api or resolve)[1] if (api or resolve) else None
        repo = self.fake.repos.get(repo_id) if repo_id else None
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found", head)
        if repo.delay:
            time.sleep(repo.delay)
        with self.fake.lock:
            failing = repo.fail > 0
            if failing:
                repo.fail -= 1
        if failing:
            return self._error(repo.fail_status, None, "Service Unavailable", head)
        if repo.private and not self._authorized():
            return self._error(401, "RepoNotFound", "Repository not found", head)
        rev = (api[2] if api else resolve[2]) or "main"  # type: ignore[index]
        sha = rev if rev in repo.commits else repo.refs.get(rev)
        if sha is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: " + rev, head)
        files = repo.commits[sha]
        if api:
            info = {"_id": _sha(repo.id)[:24], "id": repo.id, "modelId": repo.id, "sha": sha, "private": repo.private,
                    "gated": "manual" if repo.gated else False,
                    "siblings": [{"rfilename": name} for name in sorted(files)]}
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head=head)
        if repo.gated and not self._authorized():
            return self._error(401, "GatedRepo", f"Access to model {repo.id} is restricted.", head)
        filename = resolve[3]  # type: ignore[index]
        content = files.get(filename)
        if content is None:
            return self._error(404, "EntryNotFound", "Entry not found", head, {"X-Repo-Commit": sha})
        size = content.size if isinstance(content, Safetensors) else len(content)
        stored = content.prefix if isinstance(content, Safetensors) else content
        headers = {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha256(stored).hexdigest()}"',
                   "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        wanted = self.headers.get("Range")
        if wanted is None:
            if isinstance(content, Safetensors) and not head:
                with self.fake.lock:
                    self.fake.weight_data_requests.append(f"GET {filename} (whole file)")
                return self._error(403, None, "the fixture hub serves no weights", head)
            return self._send(200, stored, headers, head=head, length=size if head else None)
        m = _RANGE.match(wanted.strip())
        if not m:
            return self._error(416, None, "bad range", head)
        start, end = int(m[1]), min(int(m[2]) if m[2] else size - 1, size - 1)
        if start > end:
            return self._error(416, None, "range not satisfiable", head)
        if isinstance(content, Safetensors) and end >= content.header_end:
            with self.fake.lock:
                self.fake.weight_data_requests.append(f"GET {filename} bytes {max(start, content.header_end)}-{end}")
        body = stored[start:end + 1]
        body += b"\0" * (end + 1 - start - len(body))  # the data part is not stored: zeros
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return self._send(206, body, headers, head=head, rng=(start, end))
