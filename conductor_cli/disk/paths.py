"""Where conductor keeps its files; every location can be moved by an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "conductor"


def config_file() -> Path:
    env = os.environ.get("CONDUCTOR_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP)) / "config.toml"


def data_dir() -> Path:
    env = os.environ.get("CONDUCTOR_DATA_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir(APP))


def cache_dir() -> Path:
    env = os.environ.get("CONDUCTOR_CACHE_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir(APP))


def state_dir() -> Path:
    """Derived files kept for speed only: llama.cpp prompt states (backends/prefix_state.py),
    the 16-bit copies hidden states are read from (backends/f16_copy.py) and the float32 torch
    copy of a conductor being trained (train/base_copy.py)."""
    env = os.environ.get("CONDUCTOR_STATE_DIR")
    return Path(env).expanduser() if env else cache_dir() / "llama-state"


def torch_bases_dir() -> Path:
    """The float32 torch copies of conductors being trained (train/base_copy.py) and their
    float32 GGUFs that the export check loads (train/export_check.py)."""
    return state_dir() / "torch-base"


def clear_torch_bases() -> int:
    """`cache clear`: remove every kept float32 copy; how many there were."""
    import shutil

    directory = torch_bases_dir()
    if not directory.is_dir():
        return 0
    copies = [p for p in directory.iterdir() if not p.name.startswith(".")]
    shutil.rmtree(directory, ignore_errors=True)
    return len(copies)


def models_dir() -> Path:
    env = os.environ.get("CONDUCTOR_MODELS_DIR")
    return Path(env).expanduser() if env else data_dir() / "models"


def private_dir(path: Path) -> Path:
    """Create a directory readable only by its owner (it may hold prompts and answers)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def runtime_dir() -> Path:
    """A running server's socket, pid file and log (the platform's per-user runtime dir)."""
    env = os.environ.get("CONDUCTOR_RUNTIME_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        return Path(base) / APP
    return Path(platformdirs.user_state_dir(APP)) / "run"
