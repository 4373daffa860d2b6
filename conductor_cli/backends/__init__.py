"""The two ways to call a model, behind one small interface used by conductor and workers."""

from conductor_cli.backends.base import Backend, Completion, Request

__all__ = ["Backend", "Completion", "Request"]
