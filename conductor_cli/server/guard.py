"""Which requests the server serves at all: only what a local client sent on purpose.

A web page the user visits can send requests to 127.0.0.1 (a form, a `text/plain` fetch that
needs no preflight) and, through DNS rebinding, read the answers under a name of its own. So
before any route: where no key is set, the Host header must name this server (a loopback
name or address, the address it is bound to, or one of `[server] allowed_hosts`); a request
that carries an Origin (browsers send one on every cross-site request) is refused unless
`[server] allowed_origins` names it; a POST must say its body is JSON (a browser sends
`application/json` across sites only after a preflight, which allows nothing foreign). The
bearer key, where one is set, is the listener's own check (every method, HEAD included).

Pure functions over the request's method and headers: the handler asks `refusal()` first.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

# The headers a browser may send after an allowed preflight: what the three APIs' clients send.
CORS_HEADERS = (
    "authorization, content-type, x-api-key, anthropic-version, anthropic-beta, "
    "openai-organization, openai-project"
)
ALLOWED_METHODS = "GET, HEAD, POST, OPTIONS"


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


@dataclass(frozen=True)
class RequestPolicy:
    """What a listener accepts besides its key. `hosts`: names (lower case, no port) a Host
    header may give besides loopback ones; `origins`: Origin values allowed
    (scheme://host[:port]); `check_host`: whether Host is checked at all. It is not on the
    local socket (no browser reaches one), nor where requests must carry a bearer key (a
    rebinding page does not know it, and the server is reached by whatever name its clients
    use)."""

    hosts: frozenset[str] = frozenset()
    origins: frozenset[str] = frozenset()
    check_host: bool = True

    @classmethod
    def for_listener(
        cls,
        bound: str | None,
        keyed: bool,
        hosts: Iterable[str] = (),
        origins: Iterable[str] = (),
    ) -> RequestPolicy:
        """The policy of a listener on TCP address `bound` (None: the local socket), with a
        bearer key or not, and the config's allowances."""
        names = {h.strip().lower().strip("[]") for h in hosts if h.strip()}
        if bound:
            names.add(bound.lower().strip("[]"))
        return cls(
            frozenset(names),
            origins=frozenset(o.strip().rstrip("/").lower() for o in origins if o.strip()),
            check_host=bound is not None and not keyed,
        )

    def host_allowed(self, header: str | None) -> bool:
        if not self.check_host or header is None:
            return True  # no Host: HTTP/1.0 tools, never a browser
        name = host_name(header)
        if name is None:
            return False
        if name == "localhost" or name in self.hosts or "*" in self.hosts:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def origin_allowed(self, origin: str | None) -> bool:
        return origin is None or origin.strip().rstrip("/").lower() in self.origins


def host_name(header: str) -> str | None:
    """The host of a Host header without its port ("[::1]:8787" -> "::1"); None if malformed."""
    text = header.strip().lower()
    if not text or any(c.isspace() or c in "/?#@\\" for c in text):
        return None
    try:
        parts = urlsplit(f"//{text}")
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError:
        return None
    return parts.hostname or None


def is_json(content_type: str | None) -> bool:
    """`application/json`, with or without parameters (charset)."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def refusal(policy: RequestPolicy, method: str, headers: dict[str, str | None]) -> Refusal | None:
    """Why this request is refused before any route sees it, or None. `headers` holds
    `host`, `origin` and `content-type` (None where absent)."""
    host = headers.get("host")
    if not policy.host_allowed(host):
        return Refusal(
            HTTPStatus.FORBIDDEN,
            f"Host {host!r} is not this server's name: send requests to 127.0.0.1 or localhost, "
            "or add the name to [server] allowed_hosts",
        )
    origin = headers.get("origin")
    if not policy.origin_allowed(origin):
        return Refusal(
            HTTPStatus.FORBIDDEN,
            f"requests from web pages (Origin {origin!r}) are refused; allow a page you trust "
            "with [server] allowed_origins",
        )
    if method == "POST" and not is_json(headers.get("content-type")):
        return Refusal(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            "send the body as JSON with Content-Type: application/json",
        )
    return None
