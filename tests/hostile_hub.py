"""A broken or hostile Hugging Face Hub on 127.0.0.1, for the tests: each repo id picks one misbehaviour.

``hostile/<mode>`` is the repo; what the server does with it:

- model info: ``garbage-info`` (HTML instead of JSON), ``typed-info`` (JSON of the wrong types),
  ``deep-info`` (200,000 nested arrays), ``huge-int-info`` (a 5,000-digit number), ``silent``
  (never answers), ``endless-info`` (a body that never ends), ``drip-info`` (a byte every 50 ms,
  forever), ``redirect-loop`` (302 to itself), ``retry-after`` (503 asking to wait a day),
  ``retry-after-digits`` (... a wait of 5,000 digits),
  ``gzip-bomb`` (64 MiB of zeros in 64 KB of gzip), ``error-garbage`` (a 404 whose JSON body is a
  list nested 200,000 deep);
- with a valid model info: ``endless-config`` (config.json's HEAD is fine, its body never ends),
  ``no-commit-head`` (config.json's HEAD has no X-Repo-Commit), ``huge-header`` (a safetensors
  header length of 100 MB, then an endless body), ``deep-header`` (a header nested 200,000 deep),
  ``many-shards`` (100,000 weight files listed), ``traversal-commit`` / ``traversal-etag`` (a commit id
  or an ETag that climbs out of the HF cache);
- and one that behaves: ``gzip-ok`` compresses its model info and config.json, as a CDN may.

Every answer is bounded on the server's side too (at most :data:`MAX_SERVE_S` seconds, stopped when
the client goes away or the server stops): a test can never hang on this server.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import time
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

MAX_SERVE_S = 20.0
SHA = hashlib.sha1(b"hostile").hexdigest()
CONFIG = (Path(__file__).parent / "data" / "hf_configs" / "Qwen__Qwen3-0.6B.json").read_bytes()

MODES = ("garbage-info", "typed-info", "deep-info", "huge-int-info", "silent", "endless-info", "drip-info",
         "redirect-loop", "retry-after", "gzip-bomb", "error-garbage", "endless-config", "no-commit-head",
         "huge-header", "deep-header", "many-shards", "traversal-commit", "traversal-etag", "gzip-ok",
         "retry-after-digits")


@lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    return gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)


class HostileHub:
    def __init__(self) -> None:
        self.stop_event = threading.Event()
        self.server: ThreadingHTTPServer | None = None
        self.requests: list[str] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> HostileHub:
        hub = self

        class Handler(_Handler):
            hostile = hub

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:  # clients hang up: expected
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    hostile: HostileHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    # ----------------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, *, head: bool = False) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _until(self) -> float:
        return time.monotonic() + MAX_SERVE_S

    def _endless(self, chunk: bytes, pause: float = 0.0) -> None:
        """A chunked body that never ends (until the client leaves, the server stops or MAX_SERVE_S)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        until = self._until()
        try:
            while time.monotonic() < until and not self.hostile.stop_event.is_set():
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                if pause:
                    time.sleep(pause)
        except OSError:
            pass
        self.close_connection = True

    def _info(self, files: list[str] | None = None) -> bytes:
        files = files if files is not None else ["config.json", "model.safetensors"]
        return json.dumps({"id": "x", "sha": SHA, "siblings": [{"rfilename": f} for f in files]}).encode()

    def _file_headers(self, body: bytes) -> dict[str, str]:
        return {"X-Repo-Commit": SHA, "ETag": f'"{hashlib.sha256(body).hexdigest()}"', "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream", "Content-Length": str(len(body))}

    def _serve(self, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.hostile.lock:
            self.hostile.requests.append(f"{self.command} {path}")
        parts = path.strip("/").split("/")
        api = parts[:2] == ["api", "models"]
        mode = parts[3] if api and len(parts) > 3 else parts[1] if len(parts) > 1 else ""
        if mode not in MODES:
            return self._send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}, head=head)
        if mode == "silent":  # accept, read the request, never answer
            self.hostile.stop_event.wait(MAX_SERVE_S)
            self.close_connection = True
            return None
        if mode == "redirect-loop":
            return self._send(302, b"", {"Location": path}, head=head)
        if mode == "retry-after":
            return self._send(503, b"{}", {"Retry-After": "86400"}, head=head)
        if mode == "retry-after-digits":
            return self._send(503, b"{}", {"Retry-After": "9" * 5000}, head=head)
        if api:
            return self._serve_info(mode, head)
        return self._serve_file(mode, parts[-1], head)

    def _serve_info(self, mode: str, head: bool) -> None:
        json_type = {"Content-Type": "application/json"}
        if mode == "garbage-info":
            return self._send(200, b"<html><body>Welcome to nginx!</body></html>", json_type, head=head)
        if mode == "typed-info":
            return self._send(200, b'{"sha": 5, "siblings": "config.json"}', json_type, head=head)
        if mode == "deep-info":
            return self._send(200, b"[" * 200_000 + b"]" * 200_000, json_type, head=head)
        if mode == "huge-int-info":
            return self._send(200, b'{"sha": ' + b"1" * 5000 + b"}", json_type, head=head)
        if mode == "endless-info":
            return self._endless(b'{"siblings": [' + b'{"rfilename": "x"}, ' * 4096)
        if mode == "drip-info":
            return self._endless(b" ", pause=0.05)
        if mode == "gzip-bomb":
            return self._send(200, gzip_bomb(), {**json_type, "Content-Encoding": "gzip"}, head=head)
        if mode == "error-garbage":
            return self._send(404, b"[" * 200_000 + b"]" * 200_000, {**json_type, "X-Error-Code": "EntryNotFound"},
                              head=head)
        if mode == "gzip-ok":  # a well-behaved Hub that compresses: must still work
            return self._send(200, gzip.compress(self._info(["config.json"])),
                              {**json_type, "Content-Encoding": "gzip"}, head=head)
        if mode == "many-shards":
            files = ["config.json", *(f"model-{i:05d}-of-99999.safetensors" for i in range(1, 100_000))]
            return self._send(200, self._info(files), json_type, head=head)
        return self._send(200, self._info(), json_type, head=head)

    def _serve_file(self, mode: str, filename: str, head: bool) -> None:
        if filename == "config.json":
            headers = self._file_headers(CONFIG)
            if mode == "no-commit-head":
                del headers["X-Repo-Commit"]
            if mode == "traversal-commit":
                headers["X-Repo-Commit"] = "../../../../outside"  # from snapshots/: the test's tmp_path
            if mode == "traversal-etag":
                headers["ETag"] = '"../../../../outside"'  # from blobs/: the test's tmp_path
            if mode == "gzip-ok":
                packed = gzip.compress(CONFIG)
                return self._send(200, packed, {**headers, "Content-Encoding": "gzip", "Content-Length": str(len(packed)),
                                                "X-Linked-Size": str(len(CONFIG))}, head=head)
            if mode == "endless-config" and not head:
                return self._endless(b"{" + b" " * 65536)
            return self._send(200, CONFIG, headers, head=head)
        if filename.endswith(".safetensors"):
            if mode == "huge-header":
                wanted = self.headers.get("Range", "")
                if wanted == "bytes=0-7":
                    return self._send(206, (100 * 1024 * 1024 - 8).to_bytes(8, "little"),
                                      {"Content-Range": "bytes 0-7/999999999999"}, head=head)
                return self._endless(b"\0" * 65536)
            if mode == "deep-header":
                header = b"[" * 200_000 + b"]" * 200_000
                prefix = len(header).to_bytes(8, "little") + header
                wanted = self.headers.get("Range", "")
                start, _, end = wanted.removeprefix("bytes=").partition("-")
                body = prefix[int(start):int(end) + 1]
                return self._send(206, body, {"Content-Range": f"bytes {start}-{end}/{len(prefix)}"}, head=head)
        return self._send(404, b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound",
                                                                  "X-Repo-Commit": SHA}, head=head)
