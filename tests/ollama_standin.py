"""A local stand-in for an Ollama server (none can run here): /api/embed and /api/tags as documented.

This is the one mock in the suite: it replaces the Ollama server process, not our client code.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fakes import HashEmbedder


class OllamaStandIn:
    def __init__(self, models=("bge-m3:latest",), dims=1024, delay=0.0):
        self.models = list(models)
        self.embedder = HashEmbedder(dimensions=dims)
        self.delay = delay
        self.requests: list[dict] = []
        self.open = threading.Event()  # cleared: embed requests are held (counted in `held`) until it is set again
        self.open.set()
        self.held = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # a client that gave up (a timeout test) breaks the pipe of a late answer: not an error to print into
        # whatever test runs next
        self.server.handle_error = lambda request, address: None
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/api/tags":
                    self._reply(200, {"models": [{"name": m, "model": m} for m in standin.models]})
                else:
                    self._reply(404, {"error": "not found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.requests.append({"path": self.path, **body})
                if self.path != "/api/embed":
                    return self._reply(404, {"error": "not found"})
                names = {m.split(":")[0] for m in standin.models}
                if body["model"].split(":")[0] not in names:
                    return self._reply(404, {"error": f'model "{body["model"]}" not found, try pulling it first'})
                if not standin.open.is_set():
                    standin.held += 1
                    standin.open.wait(300)
                time.sleep(standin.delay)
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vecs = standin.embedder.embed_documents(texts) * 3.0  # unnormalised, as some models return
                self._reply(200, {"model": body["model"], "embeddings": vecs.tolist(), "total_duration": 1,
                                  "load_duration": 1, "prompt_eval_count": len(texts)})

        return Handler
