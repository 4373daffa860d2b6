"""FakeOpenAIServer: a fake OpenAI-compatible chat server on 127.0.0.1, for fault injection.

Each request takes the next behaviour from a script ("ok", "slow", "500", "429", "hang",
"malformed", "empty", "reset": the connection is reset, "half": half the answer, then the
connection closes); the last one repeats. A request with `"stream": true` gets server-sent
events. Every request is recorded with its time.
"""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field


@dataclass
class FakeOpenAIServer:
    script: list[str]
    answer: str = "fake answer"  # "{n}" becomes the request's number, counting from 1
    answers: list[str] | None = None  # one per request, the last repeats; replaces `answer`
    delay: float = 1.0  # seconds a "slow" request takes
    requests: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.server = _FakeHTTPServer(self)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _FakeHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _FaultHandler)


class _FaultHandler(http.server.BaseHTTPRequestHandler):
    """One request to the fake: the script's next behaviour."""

    server: _FakeHTTPServer

    def do_POST(self) -> None:
        fake = self.server.fake
        lock = fake.lock
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
        if mode == "reset":
            # SO_LINGER 0: close() sends a TCP RST instead of a clean FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        text = fake.answers[min(n, len(fake.answers) - 1)] if fake.answers else fake.answer
        content = "" if mode == "empty" else text.replace("{n}", str(n + 1))
        if body.get("stream"):
            self._stream(content, half=mode == "half")
            return
        if mode == "half":
            payload = self._completion(content)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(200, self._completion(content))

    def _stream(self, content: str, *, half: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        words = content.split(" ")
        pieces = [w + " " for w in words[:-1]] + words[-1:]
        if half:
            pieces = pieces[: max(1, len(pieces) // 2)]
        for i, piece in enumerate(pieces):
            chunk = {
                "id": "fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": piece}
                        if i == 0
                        else {"content": piece},
                        "finish_reason": None,
                    }
                ],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        if half:
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        done = {
            "id": "fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()

    @staticmethod
    def _completion(content: str) -> bytes:
        return json.dumps(
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
        ).encode()

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass
