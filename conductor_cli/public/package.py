"""A pinned PyPI package public sets are read from (public/fetch.py fetches it): its own
module, light, so that the table of sets can be read (the CLI's help) without fetch's imports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Package:
    name: str  # on PyPI
    version: str
    file: str  # the file pip downloads for name==version
    sha256: str
    size_mb: int  # said before a first fetch

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"
