"""The ground floor of what conductor keeps on disk: where each kind of file lives (paths.py)
and how a file is replaced so that a crash or Ctrl-C leaves the old one whole (atomic.py);
one process at a time on a file (locks.py) and files kept for speed only (kept_files.py).
Everything that writes a user's files (config, traces, cache, checkpoints) builds on these."""

__all__ = ["atomic", "kept_files", "locks", "paths"]
