"""A minimal LSP client over stdio (raw JSON-RPC, Content-Length framing), as an editor drives
`protoc-gen-pydb lsp`: used by tests/devloop/test_lsp.py and bench_devloop.py."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

Json = dict[str, Any]


class Client:
    def __init__(self, root: Path, *args: str) -> None:
        argv = [sys.executable, "-c", "from pydb.plugin.entry import main; raise SystemExit(main())", "lsp", *args]
        self.proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.fd = self.proc.stdout.fileno()
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.buffer = b""
        self.next_id = 0
        self.versions: dict[str, int] = {}

    def send(self, message: Json) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def receive(self, timeout: float = 30.0) -> Json:
        deadline = time.monotonic() + timeout
        while True:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if sep:
                length = next(
                    int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")
                )
                if len(rest) >= length:
                    self.buffer = rest[length:]
                    message: Json = json.loads(rest[:length])
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                raise TimeoutError(f"no message from the language server within {timeout}s")
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError("the language server exited")
            self.buffer += chunk

    def request(self, method: str, params: Json) -> Json:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == self.next_id and "method" not in message:
                return message

    def initialize(self, root: Path) -> None:
        self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {}})
        self.send({"method": "initialized", "params": {}})

    def diagnostics(self, uri: str, timeout: float = 30.0) -> list[Json]:
        """The next publishDiagnostics for `uri`."""
        while True:
            message = self.receive(timeout)
            if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                found: list[Json] = message["params"]["diagnostics"]
                return found

    def open(self, path: Path, text: str) -> str:
        uri = path.resolve().as_uri()
        self.versions[uri] = 1
        item = {"uri": uri, "languageId": "proto", "version": 1, "text": text}
        self.send({"method": "textDocument/didOpen", "params": {"textDocument": item}})
        return uri

    def change(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        document = {"uri": uri, "version": self.versions[uri]}
        self.send(
            {
                "method": "textDocument/didChange",
                "params": {"textDocument": document, "contentChanges": [{"text": text}]},
            }
        )

    def close(self) -> None:
        try:
            self.request("shutdown", {})
            self.send({"method": "exit"})
            self.proc.wait(timeout=10)
        except (TimeoutError, EOFError, subprocess.TimeoutExpired, BrokenPipeError):
            self.proc.kill()
            self.proc.wait()


def bench(rpcs: int, edits: int) -> Json:
    """Time from didChange (a typo in one statement) to the publishDiagnostics reporting it."""
    import statistics

    import synth

    with tempfile.TemporaryDirectory(prefix="bench-lsp-") as tmp:
        root = Path(tmp)
        name = synth.write_pydb(root, rpcs)
        text = (root / name).read_text()
        client = Client(root, "-I", ".")
        try:
            client.initialize(root)
            uri = client.open(root / name, text)
            assert client.diagnostics(uri) == []
            sites = [i for i in range(len(text)) if text.startswith("WHERE id = @id", i)]
            times = []
            for site in sites[:: max(1, len(sites) // edits)][:edits]:
                typo = text[:site] + "WHERE idd = @id" + text[site + len("WHERE id = @id") :]
                t0 = time.perf_counter()
                client.change(uri, typo)
                found = client.diagnostics(uri)
                times.append((time.perf_counter() - t0) * 1000)
                assert len(found) == 1, found
                client.change(uri, text)
                assert client.diagnostics(uri) == []
        finally:
            client.close()
    times.sort()
    return {
        "rpcs": rpcs,
        "diagnostic_ms": {"median": statistics.median(times), "p90": times[min(len(times) - 1, int(len(times) * 0.9))],
                          "max": times[-1], "n": len(times)},
    }  # fmt: skip
