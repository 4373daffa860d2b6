"""Typed settings: defaults, loading with tomllib, validation that names file and key, saving."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from conductor_cli.disk import paths
from conductor_cli.disk.atomic import atomic_write
from conductor_cli.errors import ConfigError
from conductor_cli.exports import resolve
from conductor_cli.models.builtin_tools import tool_names
from conductor_cli.models.spec import ModelSpec, spellings

DEFAULT_MODEL = "smollm2-135m-instruct"
MAX_STEPS_LIMIT = 10
# Tries at writing the code again where the question's own examples fail (run/user_tests.py),
# unless the config says otherwise (conductor.code_retries). 2 were written before anything
# was measured; 4 were chosen by bench/code_retries.py on 100 MBPP test items nobody reports
# (right after 0..4 tries: 48, 55, 57, 58, 60), by a rule written before it ran.
CODE_RETRIES = 4
MAX_ROUNDS_LIMIT = 4
# The name the conductor had as a worker (the retired nested step); still reserved, so that
# old traces' `conductor` steps never read as a user's worker.
CONDUCTOR_WORKER = "conductor"
RESERVED_NAMES = frozenset({CONDUCTOR_WORKER})
# Why the nested conductor step went, in the one line an old config or flag gets.
NESTED_RETIRED = (
    "the nested conductor step (the conductor as a worker) was replaced by rounds, where the "
    "conductor reads its team's answer and corrects or keeps it"
)
KV_CACHE_TYPES = ("f16", "q8_0", "q4_0")
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,31}$")


@dataclass(frozen=True)
class ConductorSettings:
    model: str = DEFAULT_MODEL
    n_gpu_layers: int = -1
    n_ctx: int = 8192
    n_threads: int = 0  # 0: one thread per physical core
    # The KV cache's number format. q8_0 halves its memory against f16 (8192 tokens of the
    # default model: 94 MB instead of 188 MB) at a loss too small to see in a plan.
    kv_cache_type: str = "q8_0"
    max_steps: int = 5
    # Rounds of plan -> run -> read the answer -> re-plan (the paper's recursion); the
    # conductor may stop earlier by keeping the answer. 1: no re-planning (see README).
    max_rounds: int = 1
    temperature: float = 0.2
    seed: int = 0
    # Logits taken from every token that would start another step of a grammar-constrained
    # plan (backends/constrained.py): the prior that a step costs a call. Measured on the
    # embedded default (docs/workflows.md): without it the 135M conductor copied its prompt's
    # 2- and 3-step examples onto one-line facts, and lost to one plain call.
    step_penalty: float = 1.0
    # Times the code of an answer is written again where the examples its question shows
    # fail (run/user_tests.py): each try is a test step and a writer's step, on top of the
    # plan's max_steps. 0: the examples are not run.
    code_retries: int = CODE_RETRIES
    api_base: str | None = None
    api_key_env: str | None = None

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec.for_conductor(self.model)


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    model: str
    description: str = ""
    api_base: str | None = None
    api_key_env: str | None = None
    max_tokens: int = 512
    temperature: float = 0.2
    timeout_s: float = 120.0
    retries: int = 2  # further tries after a retryable failure (timeout, 429, 5xx, refused)
    fallback: str | None = None  # worker that takes the step when this one still fails
    max_concurrency: int = 4
    input_cost_per_mtok: float | None = None  # USD per million tokens, when litellm has no price
    output_cost_per_mtok: float | None = None
    context_tokens: int | None = None  # None: conductor.n_ctx for GGUF, 128k for remote models
    # A local (gguf:) worker stops when its output starts repeating itself (a 135M model loops
    # until max_tokens); remote models ignore it.
    stop_loops: bool = True

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec.for_worker(self.model)

    @property
    def tool(self) -> bool:
        return self.spec.tool


@dataclass(frozen=True)
class CacheSettings:
    enabled: bool = True
    size_limit_mb: int = 2048


@dataclass(frozen=True)
class SandboxSettings:
    """Limits of the python tool's sandbox (conductor_cli/sandbox), per program run."""

    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 512  # the program and everything it starts, together
    disk_mb: int = 64  # its folder
    processes: int = 64


@dataclass(frozen=True)
class ServerSettings:
    port: int = 8787
    # Runs at once; one more gets 429 with Retry-After (each run holds threads and memory).
    max_concurrent_runs: int = 4
    # ask/run/replay --live start a background server when none runs (issue 32: the second
    # command of a session then pays no start-up: models stay loaded, litellm imported).
    auto: bool = True
    # A background server exits after this many seconds with no request.
    idle_timeout_s: float = 600.0
    # Host names the TCP listener answers to besides loopback ones and its own address (a
    # DNS-rebinding page comes under a name of its own: server/guard.py).
    allowed_hosts: tuple[str, ...] = ()
    # Web pages (Origin values) that may call the server; every other page is refused.
    allowed_origins: tuple[str, ...] = ()
    # Whether a request on TCP may change the conductor or the workers (loading or fetching
    # a model); the CLI's own local socket always may.
    allow_overrides: bool = False


@dataclass(frozen=True)
class McpServerConfig:
    """An MCP server started over stdio for `mcp:SERVER/TOOL` workers: the fields Claude
    Desktop and Claude Code use in `mcpServers`, so an entry copies over as it is. `${VAR}` and
    `${VAR:-default}` in them are expanded from the environment when the server starts."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # (name, value) pairs, in the file's order
    type: str = "stdio"


DEFAULT_WORKER = WorkerConfig(
    name="local",
    model=f"gguf:{DEFAULT_MODEL}",
    description="SmolLM2 135M, a tiny local model: instant and free, but weak; short answers",
)


@dataclass(frozen=True)
class Team:
    """A pool and the conductor trained for exactly it (bench/prove_team.py, issue 41), shipped
    read-only in models/conductors/. The workers' words are the ones it was trained with: the
    head reads them in the planning prompt, so they must not change."""

    preset: str  # the name `conductor config init --preset` takes
    conductor: str
    workers: tuple[WorkerConfig, ...]
    summary: str


PYTHON_WORKER = WorkerConfig(name="python", model="tool:python")
CODER_MODEL = "qwen2.5-coder-1.5b-instruct"
SMALL_CODER_MODEL = "qwen2.5-coder-0.5b-instruct"


def _coder(model: str, size: str) -> WorkerConfig:
    return WorkerConfig(
        name="coder",
        model=f"gguf:{model}",
        description=f"Qwen2.5-Coder {size}, a small local coding model: writes Python programs "
        "and functions; knows common facts and words",
    )


# The embedded default since issue 41, planned since issue 57 by a head trained on public sets'
# training items and on the kinds it served before: on the public sets' test items it beats
# its best member, the 1.5B coder alone, by +0.068 [+0.014, +0.123], keeps 0.90 on the held-out
# kinds it served and 0.875 of 48 everyday facts (README, "Benchmarks others wrote").
TEAM = Team(
    preset="team",
    conductor="coder-team-1.5b-public",
    workers=(DEFAULT_WORKER, _coder(CODER_MODEL, "1.5B"), PYTHON_WORKER),
    summary="SmolLM2-135M, Qwen2.5-Coder-1.5B (1.1 GB) and the python tool",
)
SMALL_TEAM = Team(
    preset="small-team",
    conductor="coder-team",
    workers=(DEFAULT_WORKER, _coder(SMALL_CODER_MODEL, "0.5B"), PYTHON_WORKER),
    summary="SmolLM2-135M, Qwen2.5-Coder-0.5B (491 MB) and the python tool",
)
TEAMS = {t.preset: t for t in (TEAM, SMALL_TEAM)}


@dataclass(frozen=True)
class Config:
    """Settings in force; with no config file, the embedded default: the trained team."""

    conductor: ConductorSettings = field(
        default_factory=lambda: ConductorSettings(model=TEAM.conductor)
    )
    workers: tuple[WorkerConfig, ...] = TEAM.workers
    cache: CacheSettings = field(default_factory=CacheSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    mcp_servers: tuple[McpServerConfig, ...] = ()
    source: Path | None = None  # the file it came from; None for the embedded default

    def worker(self, name: str) -> WorkerConfig:
        for w in self.workers:
            if w.name == name:
                return w
        raise KeyError(name)

    def mcp_server(self, name: str) -> McpServerConfig:
        for server in self.mcp_servers:
            if server.name == name:
                return server
        raise KeyError(name)


# Allowed keys per section and their types; the order is the order `config show` writes.
_CONDUCTOR_TYPES: dict[str, type] = {
    "model": str,
    "n_gpu_layers": int,
    "n_ctx": int,
    "n_threads": int,
    "kv_cache_type": str,
    "max_steps": int,
    "max_rounds": int,
    "temperature": float,
    "seed": int,
    "step_penalty": float,
    "code_retries": int,
    "api_base": str,
    "api_key_env": str,
}
_WORKER_TYPES: dict[str, type] = {
    "name": str,
    "model": str,
    "description": str,
    "api_base": str,
    "api_key_env": str,
    "max_tokens": int,
    "temperature": float,
    "timeout_s": float,
    "retries": int,
    "fallback": str,
    "max_concurrency": int,
    "input_cost_per_mtok": float,
    "output_cost_per_mtok": float,
    "context_tokens": int,
    "stop_loops": bool,
}
_CACHE_TYPES: dict[str, type] = {"enabled": bool, "size_limit_mb": int}
_SERVER_TYPES: dict[str, type] = {
    "port": int,
    "max_concurrent_runs": int,
    "auto": bool,
    "idle_timeout_s": float,
    "allowed_hosts": list,
    "allowed_origins": list,
    "allow_overrides": bool,
}
_SANDBOX_TYPES: dict[str, type] = {
    "wall_s": float,
    "cpu_s": int,
    "memory_mb": int,
    "disk_mb": int,
    "processes": int,
}
_MCP_SERVER_TYPES: dict[str, type] = {"command": str, "args": list, "env": dict, "type": str}
_SECTIONS = ("conductor", "workers", "cache", "server", "sandbox", "mcp_servers")
_TYPE_WORDS = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list of strings",
    dict: "a table of strings",
}
_EXAMPLES = {
    "model": '"smollm2-135m-instruct"',
    "name": '"local"',
    "description": '"fast, good at code"',
    "api_base": '"http://127.0.0.1:8000/v1"',
    "api_key_env": '"OPENAI_API_KEY"',
    "enabled": "true",
    "command": '"npx"',
    "args": '["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]',
    "env": '{ API_KEY = "${API_KEY}" }',
    "allowed_hosts": '["box.lan"]',
    "allowed_origins": '["http://localhost:3000"]',
}


def _did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f" Did you mean '{close[0]}'?" if close else f" Allowed: {', '.join(options)}."


def _check_type(value: Any, expected: type, where: str) -> Any:
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        got = type(value).__name__
        example = _EXAMPLES.get(where.rsplit(".", 1)[-1], "")
        hint = f" e.g. {where.rsplit('.', 1)[-1]} = {example}" if example else ""
        raise ConfigError(
            f"{where}: expected {_TYPE_WORDS[expected]}, got {value!r} ({got}).{hint}"
        )
    return value


# Names people give a key written into the file; it is refused with what to do instead.
SECRET_KEYS = frozenset({"api_key", "key", "token", "secret", "password", "api_token"})


def _strings(value: list[Any], where: str) -> tuple[str, ...]:
    _require(
        all(isinstance(v, str) and v.strip() for v in value),
        where,
        f"expected a list of non-empty strings, got {value!r}.",
    )
    return tuple(v.strip() for v in value)


def _section(raw: Any, types: dict[str, type], where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table like [{where.split(': ')[-1]}].")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in types:
            if key in SECRET_KEYS and "api_key_env" in types:
                raise ConfigError(
                    f"{where}.{key}: keys never go in the config file; export the key in an "
                    'environment variable and name it with api_key_env = "VARIABLE".'
                )
            raise ConfigError(f"{where}.{key}: unknown key.{_did_you_mean(key, tuple(types))}")
        out[key] = _check_type(value, types[key], f"{where}.{key}")
    return out


def _without_retired(raw: Any) -> Any:
    """The [conductor] table without `max_depth`: 0 (what `config init` used to write) is
    dropped; recursion asked for gets one line saying what replaced it."""
    if not isinstance(raw, dict) or "max_depth" not in raw:
        return raw
    depth = raw["max_depth"]
    if depth != 0:
        raise ConfigError(
            f"conductor.max_depth: {NESTED_RETIRED}. Delete the max_depth line and set "
            f"max_rounds = {rounds_for_depth(depth)} for that."
        )
    return {k: v for k, v in raw.items() if k != "max_depth"}


def rounds_for_depth(depth: Any) -> int:
    """The rounds that give the conductor as many looks at its team's work as max_depth did."""
    if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0:
        return min(depth + 1, MAX_ROUNDS_LIMIT)
    return 2


def _require(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{where}: {msg}")


def check_mcp_model(w: WorkerConfig, where: str) -> None:
    """`mcp:SERVER/TOOL` names both (that SERVER is a table is checked with the tables)."""
    _require(
        bool(w.spec.mcp_server and w.spec.mcp_tool),
        f"{where}.model",
        f'{w.model!r}: an MCP tool is mcp:SERVER/TOOL, e.g. "mcp:files/read_file", with '
        "SERVER a table [mcp_servers.SERVER].",
    )


def check_tool_model(w: WorkerConfig, where: str) -> None:
    """`tool:NAME` names a built-in tool."""
    tools = tool_names()
    _require(
        w.spec.name in tools,
        f"{where}.model",
        f"{w.model!r}: no such tool; the tools are "
        f"{', '.join('tool:' + t for t in tools)}.{_did_you_mean(w.spec.name, tools)}",
    )


def _validate_conductor(c: ConductorSettings, where: str) -> None:
    _require(c.model.strip() != "", f"{where}.model", "must not be empty.")
    _require(
        bool(c.spec.entry.conductor),
        f"{where}.model",
        f"{c.model!r} is a tool, and the conductor writes workflows: use "
        f"{spellings(conductor=True)} here, and give the tool to a [[workers]] entry.",
    )
    _require(c.n_ctx >= 512, f"{where}.n_ctx", f"must be at least 512, got {c.n_ctx}.")
    _require(
        1 <= c.max_steps <= MAX_STEPS_LIMIT,
        f"{where}.max_steps",
        f"must be between 1 and {MAX_STEPS_LIMIT}, got {c.max_steps}.",
    )
    _require(
        1 <= c.max_rounds <= MAX_ROUNDS_LIMIT,
        f"{where}.max_rounds",
        f"must be between 1 and {MAX_ROUNDS_LIMIT}, got {c.max_rounds}.",
    )
    _require(0.0 <= c.temperature <= 2.0, f"{where}.temperature", "must be between 0 and 2.")
    _require(
        0.0 <= c.step_penalty <= 100.0,
        f"{where}.step_penalty",
        "must be between 0 (steps are free) and 100 (one step, always).",
    )
    _require(
        0 <= c.code_retries <= MAX_STEPS_LIMIT // 2,
        f"{where}.code_retries",
        f"must be between 0 and {MAX_STEPS_LIMIT // 2}, got {c.code_retries}.",
    )
    _require(c.n_threads >= 0, f"{where}.n_threads", "must be 0 (auto) or a positive count.")
    _require(
        c.kv_cache_type in KV_CACHE_TYPES,
        f"{where}.kv_cache_type",
        f"must be one of {', '.join(KV_CACHE_TYPES)}, got {c.kv_cache_type!r}.",
    )


def _validate_worker(w: WorkerConfig, where: str) -> None:
    _require(
        bool(NAME_RE.match(w.name)),
        f"{where}.name",
        f"{w.name!r} is not a valid name: use letters, digits, '_', '-' or '.', "
        "starting with a letter, at most 32 characters.",
    )
    _require(
        w.name not in RESERVED_NAMES,
        f"{where}.name",
        f"{w.name!r} is reserved for the conductor itself; pick another name.",
    )
    _require(w.model.strip() != "", f"{where}.model", "must not be empty.")
    if w.spec.entry.check:  # the model kind's own check (models/spec.MODEL_KINDS)
        resolve(w.spec.entry.check)(w, where)
    _require(w.max_tokens >= 1, f"{where}.max_tokens", "must be at least 1.")
    _require(
        w.context_tokens is None or w.context_tokens >= 512,
        f"{where}.context_tokens",
        "must be at least 512 (the model's context window, in tokens).",
    )
    _require(0.0 <= w.temperature <= 2.0, f"{where}.temperature", "must be between 0 and 2.")
    _require(w.timeout_s > 0, f"{where}.timeout_s", "must be more than 0 seconds.")
    _require(0 <= w.retries <= 10, f"{where}.retries", "must be 0 to 10.")
    _require(w.max_concurrency >= 1, f"{where}.max_concurrency", "must be at least 1.")
    for key in ("input_cost_per_mtok", "output_cost_per_mtok"):
        value = getattr(w, key)
        _require(value is None or value >= 0, f"{where}.{key}", "must not be negative.")


def _mcp_servers(raw: Any) -> tuple[McpServerConfig, ...]:
    _require(
        isinstance(raw, dict),
        "mcp_servers",
        'expected tables like [mcp_servers.NAME] with command = "..." (and args, env).',
    )
    servers = []
    for name, table in raw.items():
        where = f"mcp_servers.{name}"
        _require(
            bool(NAME_RE.match(name)) and "/" not in name,
            where,
            f"{name!r} is not a valid server name: use letters, digits, '_', '-' or '.', "
            "starting with a letter, at most 32 characters.",
        )
        fields_ = _section(table, _MCP_SERVER_TYPES, where)
        _require(
            isinstance(fields_.get("command"), str) and fields_["command"].strip() != "",
            f"{where}.command",
            'missing; an MCP server needs the program that starts it, e.g. command = "npx", '
            'args = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"].',
        )
        args = fields_.get("args", [])
        _require(
            all(isinstance(a, str) for a in args),
            f"{where}.args",
            f"expected a list of strings, got {args!r}.",
        )
        env = fields_.get("env", {})
        for key, value in env.items():
            _require(
                isinstance(value, str),
                f"{where}.env.{key}",
                f'expected a string, got {value!r}; quote it, e.g. {key} = "{value}".',
            )
        kind = fields_.get("type", "stdio")
        _require(
            kind == "stdio",
            f"{where}.type",
            f'{kind!r}: only "stdio" servers (a command to start) are supported.',
        )
        servers.append(
            McpServerConfig(name, fields_["command"], tuple(args), tuple(env.items()), kind)
        )
    return tuple(servers)


def _check_mcp_workers(
    workers: tuple[WorkerConfig, ...], servers: tuple[McpServerConfig, ...]
) -> None:
    names = [s.name for s in servers]
    for i, w in enumerate(workers):
        if w.spec.kind != "mcp" or w.spec.mcp_server in names:
            continue
        configured = (
            f"the configured servers are {', '.join(names)}."
            if names
            else "no server is configured: add a [mcp_servers."
            f'{w.spec.mcp_server}] table with command = "..." (and args, env).'
        )
        _require(
            False,
            f"workers[{i}].model",
            f"{w.model!r}: no MCP server {w.spec.mcp_server!r} in [mcp_servers]; {configured}"
            f"{_did_you_mean(w.spec.mcp_server, names) if names else ''}",
        )


def config_from_dict(raw: dict[str, Any], source: Path | None = None) -> Config:
    """Build a validated Config from parsed TOML; errors name `source` and the key."""
    prefix = f"{source}: " if source else ""
    try:
        for key in raw:
            if key not in _SECTIONS:
                raise ConfigError(f"[{key}]: unknown section.{_did_you_mean(key, _SECTIONS)}")
        given = _section(_without_retired(raw.get("conductor", {})), _CONDUCTOR_TYPES, "conductor")
        if "workers" not in raw:
            # The default team comes with the conductor trained for it; a pool of one's own is
            # planned by the untrained default model unless the file names a conductor.
            given.setdefault("model", TEAM.conductor)
        conductor = ConductorSettings(**given)
        _validate_conductor(conductor, "conductor")
        cache = CacheSettings(**_section(raw.get("cache", {}), _CACHE_TYPES, "cache"))
        _require(cache.size_limit_mb >= 1, "cache.size_limit_mb", "must be at least 1.")
        server_fields = _section(raw.get("server", {}), _SERVER_TYPES, "server")
        for key in ("allowed_hosts", "allowed_origins"):
            if key in server_fields:
                server_fields[key] = _strings(server_fields[key], f"server.{key}")
        server = ServerSettings(**server_fields)
        for origin in server.allowed_origins:
            _require(
                origin.startswith(("http://", "https://")) and "/" not in origin.split("//", 1)[1],
                "server.allowed_origins",
                f"{origin!r} is not an origin; give scheme://host[:port], e.g. "
                '"http://localhost:3000".',
            )
        _require(0 <= server.port <= 65535, "server.port", "must be 0 to 65535.")
        _require(
            server.max_concurrent_runs >= 1, "server.max_concurrent_runs", "must be at least 1."
        )
        _require(server.idle_timeout_s > 0, "server.idle_timeout_s", "must be above 0.")
        sandbox = SandboxSettings(**_section(raw.get("sandbox", {}), _SANDBOX_TYPES, "sandbox"))
        for key, value in asdict(sandbox).items():
            _require(value > 0, f"sandbox.{key}", "must be above 0.")
        workers: tuple[WorkerConfig, ...] = TEAM.workers
        if "workers" in raw:
            items = raw["workers"]
            _require(
                isinstance(items, list) and len(items) > 0,
                "workers",
                "expected at least one [[workers]] table with name and model.",
            )
            built = []
            seen: set[str] = set()
            for i, item in enumerate(items):
                where = f"workers[{i}]"
                fields_ = _section(item, _WORKER_TYPES, where)
                for needed in ("name", "model"):
                    _require(
                        needed in fields_,
                        f"{where}.{needed}",
                        "missing; every worker needs a name and a model, "
                        'e.g. name = "local", model = "gguf:smollm2-135m-instruct".',
                    )
                w = WorkerConfig(**fields_)
                _validate_worker(w, where)
                _require(
                    w.name not in seen,
                    f"{where}.name",
                    f"duplicate worker name {w.name!r}; names must be unique.",
                )
                seen.add(w.name)
                built.append(w)
            for i, w in enumerate(built):
                if w.fallback is not None:
                    _require(
                        w.fallback in seen and w.fallback != w.name,
                        f"workers[{i}].fallback",
                        f"{w.fallback!r} is not another worker in this file."
                        f"{_did_you_mean(w.fallback, sorted(seen - {w.name}))}",
                    )
            workers = tuple(built)
        mcp_servers = _mcp_servers(raw.get("mcp_servers", {}))
        _check_mcp_workers(workers, mcp_servers)
    except ConfigError as e:
        raise ConfigError(f"{prefix}{e}") from None
    return Config(
        conductor=conductor,
        workers=workers,
        cache=cache,
        server=server,
        sandbox=sandbox,
        mcp_servers=mcp_servers,
        source=source,
    )


def load_config(path: Path | None = None) -> Config:
    """Load the config file; with none at the default location, the embedded default serves.

    A path named explicitly (argument or CONDUCTOR_CONFIG) must exist.
    """
    explicit = path is not None or bool(os.environ.get("CONDUCTOR_CONFIG"))
    file = path if path is not None else paths.config_file()
    if not file.exists():
        if explicit:
            raise ConfigError(
                f"{file}: config file not found. Create it with `conductor config init` "
                "or point --config at an existing file."
            )
        return Config()
    if file.is_dir():
        raise ConfigError(f"{file}: is a directory, not a config file.")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError(f"{file}: cannot read config file: {reason}.") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{file}: invalid TOML: {e}. Fix the syntax there.") from None
    return config_from_dict(raw, source=file)


def config_to_dict(config: Config) -> dict[str, Any]:
    """The TOML-ready form: None values left out (TOML has no null)."""

    def clean(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if v is not None}

    out: dict[str, Any] = {
        "conductor": clean(asdict(config.conductor)),
        "workers": [clean(asdict(w)) for w in config.workers],
        "cache": clean(asdict(config.cache)),
        "server": clean(asdict(config.server)),
    }
    if config.sandbox != SandboxSettings():  # left out at its defaults, as mcp_servers
        out["sandbox"] = asdict(config.sandbox)
    if config.mcp_servers:  # left out when there are none, so older outputs stay the same
        out["mcp_servers"] = {
            s.name: {"command": s.command, "args": list(s.args), "env": dict(s.env)}
            for s in config.mcp_servers
        }
    return out


def save_config(config: Config, path: Path) -> None:
    import tomli_w

    atomic_write(path, tomli_w.dumps(config_to_dict(config)).encode("utf-8"))


def restrict_workers(config: Config, names: list[str]) -> Config:
    """Keep only the named workers (the `--worker` option), in the order given. Part of the
    team is planned by the default model: its trained conductor knows the whole team."""
    if not names:
        return config
    known = [w.name for w in config.workers]
    chosen = []
    for name in dict.fromkeys(names):
        if name not in known:
            where = config.source or "the embedded default config"
            raise ConfigError(
                f"--worker {name}: no such worker in {where}.{_did_you_mean(name, known)}"
            )
        chosen.append(config.worker(name))
    restricted = replace(config, workers=tuple(chosen))
    for team in TEAMS.values():
        whole = {w.name for w in team.workers} <= {w.name for w in chosen}
        if config.conductor.model == team.conductor and not whole:
            conductor = replace(config.conductor, model=DEFAULT_MODEL)
            restricted = replace(restricted, conductor=conductor)
    return restricted


def with_conductor(config: Config, **changes: Any) -> Config:
    """Override conductor settings from the command line; None means 'keep'."""
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        return config
    conductor = replace(config.conductor, **changes)
    try:
        _validate_conductor(conductor, "conductor")
    except ConfigError as e:
        raise ConfigError(f"command line: {e}") from None
    return replace(config, conductor=conductor)
