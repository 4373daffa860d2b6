"""FakeOpenAIServer: a fake OpenAI-compatible chat server on 127.0.0.1, for fault injection.

Each request takes the next behaviour from a script ("ok", "slow", "500", "429", "hang",
"malformed", "empty"); the last one repeats. Every request is recorded with its time.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import dataclass, field


@dataclass
class FakeOpenAIServer:
    script: list[str]
    answer: str = "fake answer"  # "{n}" becomes the request's number, counting from 1
    delay: float = 1.0  # seconds a "slow" request takes
    requests: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        fake = self
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    n = len(fake.requests)
                    fake.requests.append(
                        {
                            "at": time.time(),
                            "body": body,
                            "auth": self.headers.get("Authorization"),
                        }
                    )
                    mode = fake.script[min(n, len(fake.script) - 1)]
                if mode == "slow":
                    time.sleep(fake.delay)
                if mode == "hang":
                    time.sleep(30)
                    return
                if mode in ("500", "429"):
                    self._send(int(mode), b'{"error": {"message": "injected fault"}}')
                    return
                if mode == "malformed":
                    self._send(200, b'{"choices": [ this is not json')
                    return
                content = "" if mode == "empty" else fake.answer.replace("{n}", str(n + 1))
                self._send(
                    200,
                    json.dumps(
                        {
                            "id": "fake",
                            "object": "chat.completion",
                            "created": 0,
                            "model": "fake",
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content},
                                }
                            ],
                            "usage": {
                                "prompt_tokens": 10,
                                "completion_tokens": 5,
                                "total_tokens": 15,
                            },
                        }
                    ).encode(),
                )

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
