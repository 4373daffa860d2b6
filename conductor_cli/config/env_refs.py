"""`${VAR}` and `${VAR:-default}` in an [mcp_servers] entry: expanded from the environment when
the server starts (tools/mcp_tool.py), so the background server, which keeps the environment it
started with, counts these names among those that tell its environments apart
(server/local.py)."""

from __future__ import annotations

import re
from typing import Any

VAR_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def mcp_server_vars(doc: dict[str, Any]) -> set[str]:
    """The variable names a config's [mcp_servers] tables refer to (command, args, env)."""
    servers = doc.get("mcp_servers")
    if not isinstance(servers, dict):
        return set()
    texts: list[str] = []
    for table in servers.values():
        if not isinstance(table, dict):
            continue
        texts.append(str(table.get("command", "")))
        args = table.get("args")
        texts.extend(str(a) for a in args if isinstance(args, list))
        env = table.get("env")
        if isinstance(env, dict):
            texts.extend(str(v) for v in env.values())
    return {m.group(1) for text in texts for m in VAR_REF.finditer(text)}
