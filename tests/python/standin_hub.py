"""A stand-in for the hub's HTTP API on the loopback address: just the
endpoints that `huggingface_hub` 2.4 calls for a kernel repository when
`kernels` checks a publisher's trust, lists refs and variants, and
`snapshot_download` fetches files. It serves repositories held in memory,
logs every request, answers 404 to anything else, and stops by itself after
`lifetime` seconds at the latest.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Repo:
    """A kernel repository: files per commit, branches naming commits."""

    commits: dict[str, dict[str, bytes]]
    branches: dict[str, str]

    def commit(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.branches.get(revision)


@dataclass
class StandInHub:
    """The served state: repositories by id, organisations' trust."""

    repos: dict[str, Repo] = field(default_factory=dict)
    trusted: dict[str, bool] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    lifetime: float = 120.0

    def __enter__(self) -> "StandInHub":
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                hub._answer(self, body=True)

            def do_HEAD(self):
                hub._answer(self, body=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self._server.shutdown)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def fetched(self) -> list[str]:
        """Paths of the files whose content was served (GET .../resolve/...)."""
        out = []
        for method, path in self.log:
            parts = path.split("/resolve/", 1)
            if method == "GET" and len(parts) == 2:
                out.append(parts[1].split("/", 1)[1])
        return sorted(set(out))

    # -- routing ---------------------------------------------------------

    def _answer(self, req: BaseHTTPRequestHandler, *, body: bool) -> None:
        url = urlsplit(req.path)
        path = unquote(url.path)
        self.log.append((req.command, path))
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        try:
            recursive = parse_qs(url.query).get("recursive", [""])[0].lower() in ("1", "true")
            status, headers, payload = self._route(parts, recursive)
        except KeyError:
            status, headers, payload = 404, {"X-Error-Code": "RepoNotFound"}, b'{"error":"not found"}'
        if status == 404 and not headers:
            self.unknown.append(f"{req.command} {req.path}")
        req.send_response(status)
        headers.setdefault("Content-Type", "application/json")
        headers.setdefault("Content-Length", str(len(payload)))
        for k, v in headers.items():
            req.send_header(k, v)
        req.end_headers()
        if body:
            req.wfile.write(payload)

    def _route(self, parts: list[str], recursive: bool) -> tuple[int, dict[str, str], bytes]:
        def js(doc) -> tuple[int, dict[str, str], bytes]:
            return 200, {}, json.dumps(doc).encode()

        if parts[:2] == ["api", "organizations"] and parts[3:] == ["overview"]:
            org = parts[2]
            if org not in self.trusted:
                raise KeyError(org)
            return js({"name": org, "fullname": org, "avatarUrl": "", "trustedKernelPublisher": self.trusted[org]})
        if parts[:2] == ["api", "kernels"] and len(parts) >= 5:
            repo = self.repos["/".join(parts[2:4])]
            action, rest = parts[4], parts[5:]
            if action == "refs":
                return js(
                    {
                        "branches": [
                            {"name": n, "ref": f"refs/heads/{n}", "targetCommit": c} for n, c in repo.branches.items()
                        ],
                        "tags": [],
                        "converts": [],
                    }
                )
            if action == "revision" and rest:
                commit = repo.commit(rest[0])
                if commit is None:
                    return 404, {"X-Error-Code": "RevisionNotFound"}, b"{}"
                files = repo.commits[commit]
                return js({"id": "/".join(parts[2:4]), "sha": commit, "siblings": [{"rfilename": f} for f in files]})
            if action == "tree" and rest:
                commit = repo.commit(rest[0])
                if commit is None:
                    return 404, {"X-Error-Code": "RevisionNotFound"}, b"{}"
                return js(_tree(repo.commits[commit], "/".join(rest[1:]), recursive))
        if parts == ["api", "agent-harnesses"]:
            # huggingface_hub's user-agent telemetry: no agents known here.
            return js({"standardEnvVars": [], "harnesses": {}})
        if parts[0] == "kernels" and len(parts) >= 6 and parts[3] == "resolve":
            repo = self.repos["/".join(parts[1:3])]
            commit = repo.commit(parts[4])
            if commit is None:
                return 404, {"X-Error-Code": "RevisionNotFound"}, b"{}"
            content = repo.commits[commit].get("/".join(parts[5:]))
            if content is None:
                return 404, {"X-Error-Code": "EntryNotFound"}, b"{}"
            return (
                200,
                {
                    "X-Repo-Commit": commit,
                    "ETag": f'"{_oid(content)}"',
                    "Content-Type": "application/octet-stream",
                },
                content,
            )
        return 404, {}, b"{}"


def _oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _tree(files: dict[str, bytes], under: str, recursive: bool) -> list[dict]:
    """`list_repo_tree` of a folder: its children, or everything below it."""
    prefix = f"{under}/" if under else ""
    top = prefix.count("/") + 1
    entries: dict[str, dict] = {}
    for path, content in sorted(files.items()):
        if not path.startswith(prefix):
            continue
        parts = path.split("/")
        for depth in range(top, len(parts)):
            if depth > top and not recursive:
                break
            folder = "/".join(parts[:depth])
            entries.setdefault(folder, {"type": "directory", "oid": "0" * 40, "path": folder})
        if recursive or len(parts) == top:
            entries[path] = {"type": "file", "oid": _oid(content), "size": len(content), "path": path}
    return list(entries.values())
