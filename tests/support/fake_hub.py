"""A small stand-in for the Hugging Face Hub on 127.0.0.1, answering what `hf_hub_download` and
`list_repo_tree` ask: the repo tree (with sizes, blob ids and LFS sha256s) and the files
themselves (HEAD for the metadata, GET with Range for resuming). Tests point HF_ENDPOINT at it.
`fail_after`: a GET of that file stops after so many bytes, once (a dropped connection);
`delay_s`: a pause after each chunk (a slow line, to cancel or watch the progress)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CHUNK = 16 << 10
LFS_MIN = 1024  # files at least this large are stored as LFS (sha256 etag), as on the Hub


@dataclass
class FakeHub:
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)  # repo id → {path: content}
    fail_after: dict[str, int] = field(default_factory=dict)  # path → bytes sent before the line drops (once)
    delay_s: float = 0.0
    lie_sha: set[str] = field(default_factory=set)  # paths whose listed sha256 is wrong (a corrupted file)
    requests: list[str] = field(default_factory=list)
    url: str = ""

    def start(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                hub._serve(self, body=False)

            def do_GET(self) -> None:
                hub._serve(self, body=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _entry(self, path: str, data: bytes) -> dict:
        entry = {"type": "file", "path": path, "size": len(data), "oid": git_sha1(data)}
        if len(data) >= LFS_MIN:
            sha = hashlib.sha256(data + (b"x" if path in self.lie_sha else b"")).hexdigest()
            entry["lfs"] = {"oid": sha, "size": len(data), "pointerSize": 130}
        return entry

    def _serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        self.requests.append(f"{h.command} {path} {h.headers.get('Range', '')}".strip())
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
            files = self.repos.get(f"{parts[2]}/{parts[3]}")
            if files is None:
                return self._reply(h, 404, b'{"error": "Repository not found"}', body, {"X-Error-Code": "RepoNotFound"})
            listing = [self._entry(p, d) for p, d in sorted(files.items())]
            return self._reply(h, 200, json.dumps(listing).encode(), body, {"Content-Type": "application/json"})
        if len(parts) >= 5 and parts[2] == "resolve":
            repo, name = f"{parts[0]}/{parts[1]}", "/".join(parts[4:])
            data = self.repos.get(repo, {}).get(name)
            if data is None:
                return self._reply(h, 404, b"Entry not found", body, {"X-Error-Code": "EntryNotFound"})
            entry = self._entry(name, data)
            etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
            start = 0
            if rng := h.headers.get("Range"):
                start = int(rng.removeprefix("bytes=").split("-")[0])
            if start:
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            return self._reply(h, 206 if start else 200, data[start:], body, headers, stream_name=name)
        self._reply(h, 404, b"not found", body)

    def _reply(self, h: BaseHTTPRequestHandler, code: int, data: bytes, body: bool, headers: dict | None = None,
               stream_name: str = "") -> None:
        h.send_response(code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if not body:
            return
        cut = self.fail_after.pop(stream_name, None) if stream_name else None
        sent = 0
        try:
            while sent < len(data):
                piece = data[sent:sent + CHUNK]
                if cut is not None and sent + len(piece) > cut:
                    h.wfile.write(piece[:max(cut - sent, 0)])
                    h.wfile.flush()
                    h.close_connection = True
                    return
                h.wfile.write(piece)
                sent += len(piece)
                if self.delay_s:
                    time.sleep(self.delay_s)
        except (BrokenPipeError, ConnectionResetError):
            pass


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
