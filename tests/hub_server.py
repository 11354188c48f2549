"""A loopback stand-in for the Hugging Face Hub, serving folders in the Hub's URL layout, for the download tests.

It answers what huggingface_hub asks (file_download.py, hf_api.py): HEAD and GET /{repo}/resolve/{rev}/{path}
with the headers the client checks (X-Repo-Commit, ETag, Content-Length; 404 with X-Error-Code EntryNotFound or
RepoNotFound), GET /api/models/{repo}[/revision/{rev}] (the repository's sha and files), GET
/api/models/{repo}/tree/{rev}[/{path}] (a listing: the folder's own files and subfolders, as the Hub gives it, or
everything below it with ?recursive=true; HfFileSystem, and so `datasets`, globs its data files through it), and
the same under /datasets/ and /api/datasets/. Every request is recorded, so a test can assert that an offline run
made none.

Bounded: it binds 127.0.0.1 only, answers at most MAX_REQUESTS requests (503 after that), and shuts itself down
after LIFETIME_S seconds even if the test that started it never stops it."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
MAX_REQUESTS = 500
LIFETIME_S = 300.0


class LoopbackHub:
    def __init__(self, models: dict[str, Path] | None = None, datasets: dict[str, Path] | None = None):
        self.repos = {("model", k): Path(v) for k, v in (models or {}).items()}
        self.repos.update({("dataset", k): Path(v) for k, v in (datasets or {}).items()})
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: the test reads hub.requests
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._timer = threading.Timer(LIFETIME_S, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> "LoopbackHub":
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    # --- the Hub's answers ------------------------------------------------------------------------------------
    def _files(self, root: Path) -> list[Path]:
        return sorted(p for p in root.rglob("*") if p.is_file())

    def _send(self, h, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        h.send_response(status)
        for k, v in {"Content-Length": str(len(body)), "X-Repo-Commit": COMMIT, **(headers or {})}.items():
            h.send_header(k, v)
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _json(self, h, obj, head: bool) -> None:
        self._send(h, 200, json.dumps(obj).encode(), {"Content-Type": "application/json"}, head)

    def _missing(self, h, code: str, head: bool) -> None:
        self._send(h, 404, json.dumps({"error": code}).encode(), {"X-Error-Code": code,
                                                                  "X-Error-Message": code}, head)

    def _handle(self, h, head: bool) -> None:
        url = urlsplit(h.path)
        path = unquote(url.path)
        with self._lock:
            self.requests.append((h.command, path))
            over = len(self.requests) > MAX_REQUESTS
        if over:
            self._send(h, 503, b"request budget spent", head=head)
            return
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 4:
            kind = {"models": "model", "datasets": "dataset"}.get(parts[1])
            recursive = parse_qs(url.query).get("recursive", ["false"])[0].lower() == "true"
            self._api(h, kind, "/".join(parts[2:4]), parts[4:], head, recursive)
            return
        kind = "model"
        if parts[:1] == ["datasets"]:
            kind, parts = "dataset", parts[1:]
        if len(parts) >= 5 and parts[2] == "resolve":
            self._resolve(h, kind, "/".join(parts[:2]), "/".join(parts[4:]), head)
            return
        self._missing(h, "RepoNotFound", head)

    def _resolve(self, h, kind: str, repo: str, filename: str, head: bool) -> None:
        root = self.repos.get((kind, repo))
        if root is None:
            self._missing(h, "RepoNotFound", head)
            return
        f = root / filename
        if not f.is_file():
            self._missing(h, "EntryNotFound", head)
            return
        data = f.read_bytes()
        self._send(h, 200, data, {"ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                                  "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}, head)

    def _api(self, h, kind: str | None, repo: str, rest: list[str], head: bool, recursive: bool = False) -> None:
        root = self.repos.get((kind, repo))
        if root is None:
            self._missing(h, "RepoNotFound", head)
            return
        files = self._files(root)
        if not rest or rest[0] == "revision":
            self._json(h, {"id": repo, "sha": COMMIT, "private": False, "gated": False, "disabled": False,
                           "siblings": [{"rfilename": str(p.relative_to(root))} for p in files]}, head)
            return
        if rest[0] == "tree":
            folder = root.joinpath(*rest[2:])
            if not folder.is_dir():
                self._missing(h, "EntryNotFound", head)
                return
            below = sorted(folder.rglob("*") if recursive else folder.iterdir())
            entries = [{"type": "directory", "path": str(p.relative_to(root)), "size": 0, "oid": COMMIT}
                       if p.is_dir() else
                       {"type": "file", "path": str(p.relative_to(root)), "size": p.stat().st_size,
                        "oid": hashlib.sha1(p.read_bytes()).hexdigest()} for p in below]
            self._json(h, entries, head)
            return
        self._missing(h, "EntryNotFound", head)
