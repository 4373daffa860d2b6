"""Reading and changing single settings by dotted key: `conductor.max_steps`,
`cache.size_limit_mb`, `workers.NAME.description`.

Edits work on the file as written (not on the defaults-filled Config), so everything else in
it stays; the result is validated as a whole before it is written.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from conductor_cli.config.settings import (
    _CACHE_TYPES,
    _CONDUCTOR_TYPES,
    _SERVER_TYPES,
    _WORKER_TYPES,
    NESTED_RETIRED,
    Config,
    _did_you_mean,
    atomic_write,
    config_from_dict,
    config_to_dict,
    load_config,
)
from conductor_cli.errors import ConfigError

_TYPES = {"conductor": _CONDUCTOR_TYPES, "cache": _CACHE_TYPES, "server": _SERVER_TYPES}
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


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
        raise ConfigError(f"{key}: unknown section.{_did_you_mean(parts[0], [*_TYPES, 'workers'])}")
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
    return text


def get_value(config: Config, key: str) -> Any:
    """The value in force for `key` (defaults included); a section or worker gives a table."""
    data = config_to_dict(config)
    parts = key.split(".")
    if len(parts) == 1 and parts[0] in _TYPES:
        return data.get(parts[0], {})
    if parts[0] == "workers" and len(parts) == 2:
        return _worker(data["workers"], parts[1], key)
    section, name, field = _split(key)
    table = _worker(data["workers"], name, key) if name is not None else data[section]
    return table.get(field)


def _worker(workers: list[dict[str, Any]], name: str, key: str) -> dict[str, Any]:
    for w in workers:
        if w.get("name") == name:
            return w
    names = [str(w.get("name")) for w in workers]
    raise ConfigError(f"{key}: no worker named {name!r}.{_did_you_mean(name, names)}")


def set_value(raw: dict[str, Any], key: str, text: str) -> dict[str, Any]:
    """A copy of the file's contents with `key` set to `text` (typed), validated as a whole."""
    section, name, field = _split(key)
    value = coerce(key, text, _type_of(section, field))
    new = copy.deepcopy(raw)
    if name is None:
        new.setdefault(section, {})[field] = value
    else:
        if "workers" not in new:  # the file has no pool yet: start from the default one
            new["workers"] = config_to_dict(Config())["workers"]
        _worker(new["workers"], name, key)[field] = value
    config_from_dict(new)  # refuse a change that breaks the file, saying why
    return new


def load_raw(path: Path) -> dict[str, Any]:
    """The file as written (not the defaults-filled Config), so edits keep everything else."""
    if not path.exists():  # start from the embedded default's pool
        return {"workers": config_to_dict(Config())["workers"]}
    load_config(path)  # refuse to edit a file that is already invalid; say why
    import tomllib

    return tomllib.loads(path.read_text(encoding="utf-8"))


def save_raw(path: Path, raw: dict[str, Any]) -> None:
    import tomli_w

    config_from_dict(raw, source=path)  # validate before writing: a bad edit never lands
    atomic_write(path, tomli_w.dumps(raw).encode("utf-8"))
