"""Reading and changing single settings by dotted key: `conductor.max_steps`,
`cache.size_limit_mb`, `workers.NAME.description`, `mcp_servers.NAME.command` (and `.args`,
`.env.VAR`: setting a server's key adds the server).

Edits work on the file as written (not on the defaults-filled Config), so everything else in
it stays; the result is validated as a whole before it is written.
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

from conductor_cli.config.settings import (
    _CACHE_TYPES,
    _CONDUCTOR_TYPES,
    _MCP_SERVER_TYPES,
    _SERVER_TYPES,
    _WORKER_TYPES,
    NESTED_RETIRED,
    Config,
    _did_you_mean,
    config_from_dict,
    config_to_dict,
    load_config,
)
from conductor_cli.disk.atomic import atomic_write
from conductor_cli.errors import ConfigError

_TYPES = {"conductor": _CONDUCTOR_TYPES, "cache": _CACHE_TYPES, "server": _SERVER_TYPES}
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


MCP = "mcp_servers"
_MCP_KEYS = ("command", "args", "env")
_MCP_EXAMPLE = (
    "e.g. mcp_servers.fs.command npx, mcp_servers.fs.args '-y @modelcontextprotocol/"
    "server-filesystem /tmp', mcp_servers.fs.env.TOKEN '${TOKEN}'"
)


def _split_mcp(key: str) -> tuple[str, str, str]:
    """(server, field, env variable or '') for an mcp_servers.NAME.FIELD[.VAR] key."""
    parts = key.split(".")
    if len(parts) < 3 or not parts[1] or parts[2] not in _MCP_KEYS:
        raise ConfigError(f"{key}: an MCP server setting is mcp_servers.NAME.KEY, {_MCP_EXAMPLE}.")
    if parts[2] == "env":
        if len(parts) != 4 or not parts[3]:
            raise ConfigError(f"{key}: a server's variable is mcp_servers.NAME.env.VAR.")
        return parts[1], "env", parts[3]
    if len(parts) != 3:
        raise ConfigError(f"{key}: expected mcp_servers.NAME.{parts[2]}.")
    return parts[1], parts[2], ""


def _mcp_value(key: str, field: str, text: str) -> Any:
    """args as shell words or a JSON list of strings; everything else as written."""
    if field != "args":
        return text
    if text.lstrip().startswith("["):
        return _json_strings(key, text, '["-y", "pkg"]')
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}; quote the arguments as a shell would.") from None


def _json_strings(key: str, text: str, example: str) -> list[str]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ConfigError(f"{key}: expected a JSON list of strings, e.g. {example}.")
    return value


def _split(key: str) -> tuple[str, str | None, str]:
    """(section, worker name or None, field) for a dotted key; errors say what keys exist."""
    parts = key.split(".")
    if parts[0] == "workers":
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise ConfigError(
                f"{key}: a worker setting is workers.NAME.KEY, e.g. workers.local.max_tokens."
            )
        if parts[2] not in _WORKER_TYPES:
            raise ConfigError(
                f"{key}: unknown worker key.{_did_you_mean(parts[2], list(_WORKER_TYPES))}"
            )
        return "workers", parts[1], parts[2]
    if parts[0] not in _TYPES:
        known = [*_TYPES, "workers", MCP]
        raise ConfigError(f"{key}: unknown section.{_did_you_mean(parts[0], known)}")
    if len(parts) != 2:
        raise ConfigError(f"{key}: expected SECTION.KEY, e.g. conductor.max_steps.")
    if key == "conductor.max_depth":
        raise ConfigError(f"{key}: {NESTED_RETIRED}. Set conductor.max_rounds instead.")
    if parts[1] not in _TYPES[parts[0]]:
        raise ConfigError(f"{key}: unknown key.{_did_you_mean(parts[1], list(_TYPES[parts[0]]))}")
    return parts[0], None, parts[1]


def _type_of(section: str, field: str) -> type:
    return _WORKER_TYPES[field] if section == "workers" else _TYPES[section][field]


def coerce(key: str, text: str, expected: type) -> Any:
    """The command line's text as the key's type."""
    if expected is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{key}: expected true or false, got {text!r}.")
    if expected in (int, float):
        try:
            return expected(text)
        except ValueError:
            kind = "an integer" if expected is int else "a number"
            raise ConfigError(f"{key}: expected {kind}, got {text!r}.") from None
    if expected is list:  # a JSON list, or words separated by commas
        if text.lstrip().startswith("["):
            return _json_strings(key, text, '["box.lan"]')
        return [word.strip() for word in text.split(",") if word.strip()]
    return text


def get_value(config: Config, key: str) -> Any:
    """The value in force for `key` (defaults included); a section or worker gives a table."""
    data = config_to_dict(config)
    parts = key.split(".")
    if parts[0] == MCP:
        return _get_mcp(data.get(MCP, {}), key)
    if len(parts) == 1 and parts[0] in _TYPES:
        return data.get(parts[0], {})
    if parts[0] == "workers" and len(parts) == 2:
        return _worker(data["workers"], parts[1], key)
    section, name, field = _split(key)
    table = _worker(data["workers"], name, key) if name is not None else data[section]
    return table.get(field)


def _get_mcp(servers: dict[str, Any], key: str) -> Any:
    parts = key.split(".")
    if len(parts) == 1:
        return servers
    if parts[1] not in servers:
        names = list(servers)
        known = f" The configured servers: {', '.join(names)}." if names else " None is configured."
        raise ConfigError(f"{key}: no MCP server named {parts[1]!r}.{known}")
    if len(parts) == 2:
        return servers[parts[1]]
    name, field, var = _split_mcp(key)
    value = servers[name].get(field)
    if field == "env":
        return (value or {}).get(var)
    return shlex.join(value) if field == "args" else value


def _set_mcp(raw: dict[str, Any], key: str, text: str) -> dict[str, Any]:
    name, field, var = _split_mcp(key)
    assert set(_MCP_KEYS) <= set(_MCP_SERVER_TYPES)
    new = copy.deepcopy(raw)
    table = new.setdefault(MCP, {}).setdefault(name, {})
    if field == "env":
        table.setdefault("env", {})[var] = text
    else:
        table[field] = _mcp_value(key, field, text)
    config_from_dict(new)  # a new server without a command yet: the line says to set one
    return new


def _worker(workers: list[dict[str, Any]], name: str, key: str) -> dict[str, Any]:
    for w in workers:
        if w.get("name") == name:
            return w
    names = [str(w.get("name")) for w in workers]
    raise ConfigError(f"{key}: no worker named {name!r}.{_did_you_mean(name, names)}")


def with_default_pool(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of a file's contents that names no workers, with the embedded default's pool
    written out, and its trained conductor unless the file names one: written out, the pool
    alone would be planned by the untrained default model (settings.config_from_dict)."""
    new = copy.deepcopy(raw)
    default = config_to_dict(Config())
    new["workers"] = default["workers"]
    new.setdefault("conductor", {}).setdefault("model", default["conductor"]["model"])
    return new


def set_value(raw: dict[str, Any], key: str, text: str) -> dict[str, Any]:
    """A copy of the file's contents with `key` set to `text` (typed), validated as a whole."""
    if key.split(".")[0] == MCP:
        return _set_mcp(raw, key, text)
    section, name, field = _split(key)
    value = coerce(key, text, _type_of(section, field))
    new = copy.deepcopy(raw)
    if name is None:
        new.setdefault(section, {})[field] = value
    else:
        if "workers" not in new:  # the file has no pool yet: start from the default one
            new = with_default_pool(new)
        _worker(new["workers"], name, key)[field] = value
    config_from_dict(new)  # refuse a change that breaks the file, saying why
    return new


def load_raw(path: Path) -> dict[str, Any]:
    """The file as written (not the defaults-filled Config), so edits keep everything else."""
    if not path.exists():  # start from the embedded default's pool
        return with_default_pool({})
    load_config(path)  # refuse to edit a file that is already invalid; say why
    import tomllib

    return tomllib.loads(path.read_text(encoding="utf-8"))


def save_raw(path: Path, raw: dict[str, Any]) -> None:
    """Write `raw` to `path`. An existing file is edited in place (tomlkit): only the keys
    whose values differ change, and every comment, blank line, quote and key order of the
    rest stays byte for byte; a file that cannot be edited so is refused, never rewritten."""
    config_from_dict(raw, source=path)  # validate before writing: a bad edit never lands
    if not path.exists():
        import tomli_w

        atomic_write(path, tomli_w.dumps(raw).encode("utf-8"))
        return
    atomic_write(path, edited_text(path, raw).encode("utf-8"))


def edited_text(path: Path, raw: dict[str, Any]) -> str:
    """The file's text with what differs between it and `raw` changed where it is written."""
    import tomllib

    import tomlkit

    text = path.read_text(encoding="utf-8")
    before = tomllib.loads(text)
    document = tomlkit.parse(text)
    _apply(document, before, raw, path)
    after = tomlkit.dumps(document)
    if tomllib.loads(after) != raw:  # tomlkit could not say it: the file is left as it was
        raise ConfigError(
            f"{path}: this edit cannot be made without rewriting the file's layout; "
            "make it by hand (conductor config edit)"
        )
    return after


def _apply(table: Any, before: dict[str, Any], after: dict[str, Any], path: Path) -> None:
    """Change tomlkit `table` (holding `before`) into `after`, touching only what differs."""
    for key in [k for k in before if k not in after]:
        del table[key]
    for key, value in after.items():
        if key not in before:
            table[key] = _item(value)
        elif before[key] == value:
            continue
        elif isinstance(value, dict) and isinstance(before[key], dict):
            _apply(table[key], before[key], value, path)
        elif _tables(value) and _tables(before[key]):
            _apply_array(table[key], before[key], value, path)
        else:
            table[key] = value


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _apply_array(
    array: Any, before: list[dict[str, Any]], after: list[dict[str, Any]], path: Path
) -> None:
    """An array of tables ([[workers]]): tables removed, changed in place, or added at its
    end, each as the edit commands make them; anything else is refused (edited_text)."""
    if len(before) == len(after):
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            if old != new:
                _apply(array[i], old, new, path)
        return
    kept = [i for i, table in enumerate(before) if table in after]
    for i in reversed(range(len(before))):
        if i not in kept:
            del array[i]
    for table in after[len(kept) :]:
        array.append(_table(table))


def _table(value: dict[str, Any]) -> Any:
    """A new table of an array, set off from what follows by a blank line, as people write."""
    import tomlkit

    table = tomlkit.table()
    for key, item in value.items():
        table[key] = item
    table.add(tomlkit.nl())
    return table


def _item(value: Any) -> Any:
    import tomlkit

    if _tables(value):
        array = tomlkit.aot()
        for table in value:
            array.append(_table(table))
        return array
    return value
