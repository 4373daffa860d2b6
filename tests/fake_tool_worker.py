"""FakeToolCallingWorker: a fake OpenAI-compatible chat server on 127.0.0.1 that plays a model
which calls tools, for tests of agents' tool loops (a real small model's tool calls are
measured in bench/agent_tools.py).

When the conversation ends with a user message and the request offers tools, it calls the tool
named `tool` (the first one offered when that is not among them) with `arguments` (streamed in
fragments, as OpenAI streams them); when it ends with tool results, it answers "done: " and the
last result's text. Every request body is recorded.
"""

from __future__ import annotations

import http.server
import json
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeToolCallingWorker:
    arguments: str = '{"cmd": "echo hi"}'
    tool: str = "exec_command"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        fake = self
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    n = len(fake.requests)
                    fake.requests.append(body)
                messages = body.get("messages") or [{}]
                last = messages[-1]
                tools = body.get("tools") or []
                call = None
                text = ""
                if last.get("role") == "tool":
                    content = last.get("content")
                    if isinstance(content, list):
                        content = "".join(p.get("text", "") for p in content)
                    text = f"done: {content}"
                elif tools:
                    names = [t["function"]["name"] for t in tools]
                    name = fake.tool if fake.tool in names else names[0]
                    call = {"id": f"call_fake_{n}", "name": name, "arguments": fake.arguments}
                else:
                    text = "no tools were offered"
                if body.get("stream"):
                    self._stream(text, call)
                else:
                    self._send(self._completion(text, call))

            def _stream(self, text: str, call: dict[str, str] | None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                deltas: list[dict[str, Any]] = []
                if text:
                    deltas.append({"role": "assistant", "content": text})
                if call is not None:
                    head = {"name": call["name"], "arguments": ""}
                    deltas.append(
                        {
                            "tool_calls": [
                                {"index": 0, "id": call["id"], "type": "function", "function": head}
                            ]
                        }
                    )
                    args = call["arguments"]
                    for part in (args[: len(args) // 2], args[len(args) // 2 :]):
                        deltas.append(
                            {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}
                        )
                finish = "tool_calls" if call else "stop"
                for i, delta in enumerate(deltas):
                    last = i == len(deltas) - 1
                    self._event({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                    if last:
                        self._event(
                            {
                                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                                "usage": {
                                    "prompt_tokens": 10,
                                    "completion_tokens": 5,
                                    "total_tokens": 15,
                                },
                            }
                        )
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, body: dict[str, Any]) -> None:
                body = {
                    "id": "fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "fake",
                    **body,
                }
                self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
                self.wfile.flush()

            @staticmethod
            def _completion(text: str, call: dict[str, str] | None) -> bytes:
                message: dict[str, Any] = {"role": "assistant", "content": text or None}
                if call is not None:
                    message["tool_calls"] = [
                        {
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": call["arguments"]},
                        }
                    ]
                return json.dumps(
                    {
                        "id": "fake",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "fake",
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls" if call else "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                ).encode()

            def _send(self, payload: bytes) -> None:
                self.send_response(200)
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
