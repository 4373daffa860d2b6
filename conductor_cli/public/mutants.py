"""One bug put into working code, as mutation testing puts it: a token of the code swapped for
its usual mistake (a comparison for its neighbour, `+` for `-`, `and` for `or`, `True` for
`False`, a whole number for the next), the rest of the file byte for byte (comments, the
docstring and the layout stay). The public repair sets (`humaneval-fix`) are made of these:
which token of each task is swapped was chosen once by bench/make_fix_set.py (the first, in a
seeded order, whose change its hidden tests catch) and is kept in public/fix_sets.json.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

# The operators of mutation testing (cosmic-ray's and mutmut's core ones), each token to the
# mistake most like it.
SWAPS = {
    "<": "<=",
    "<=": "<",
    ">": ">=",
    ">=": ">",
    "==": "!=",
    "!=": "==",
    "+": "-",
    "-": "+",
    "*": "/",
    "//": "/",
    "%": "//",
    "and": "or",
    "or": "and",
    "True": "False",
    "False": "True",
    "+=": "-=",
    "-=": "+=",
}


@dataclass(frozen=True)
class Site:
    start: int  # offset of the token in the source
    end: int
    token: str  # what is there
    mutant: str  # what the mistake puts there


def sites(source: str, after: int = 0) -> list[Site]:
    """Every token of `source` at or after offset `after` that a mutation may swap, in order;
    none when the source does not tokenize."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    found: list[Site] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    for tok in tokens:
        start = starts[tok.start[0] - 1] + tok.start[1]
        end = starts[tok.end[0] - 1] + tok.end[1]
        if start < after:
            continue
        if tok.type == tokenize.OP or (tok.type == tokenize.NAME and tok.string in SWAPS):
            if tok.string in SWAPS:
                found.append(Site(start, end, tok.string, SWAPS[tok.string]))
        elif tok.type == tokenize.NUMBER and tok.string.isdigit():
            found.append(Site(start, end, tok.string, str(int(tok.string) + 1)))
    return found


def apply(source: str, site: Site) -> str:
    return source[: site.start] + site.mutant + source[site.end :]
