"""A PyYAML safe loader that reads plain scalars as YAML 1.2 (the core schema) does.

PyYAML implements YAML 1.1, where `yes`/`no`/`on`/`off` are booleans, `0755` is octal
(493), `1_000` is 1000, `12:30` is sexagesimal and `2024-01-02` is a date. A YAML 1.2
parser (the JavaScript `yaml` package, Go's yaml.v3, the hosts that compare a skill
entry's frontmatter with the file) reads them as the strings `"yes"`, `"1_000"`,
`"12:30"`, `"2024-01-02"` and the integer 755. The MCP skills extension requires the
frontmatter it lists to be identical to what the file says, so it is read with this.

Only the implicit typing of plain scalars changes: `null`/`~`/empty, `true`/`false`
(three spellings each), decimal, `0o` octal and `0x` hex integers, and decimal floats
with `.inf`/`.nan`. Quoted scalars and explicit tags are untouched; `<<` is a plain key.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["Yaml12SafeLoader", "mend_surrogates"]


_SURROGATE = re.compile("[\ud800-\udfff]")


def mend_surrogates(value: Any) -> Any:
    """A loaded YAML value whose strings hold no surrogate code points.

    A double-quoted YAML scalar may spell a character outside the Basic Multilingual Plane
    as a JSON-style pair of escapes (`"\\ud83c\\udf89"`, which `json.dumps` writes and a
    YAML 1.2 parser reads as one emoji); PyYAML keeps the two halves as two code points,
    which cannot be encoded as UTF-8 (a manifest holding one could never be written). A
    pair is joined into its character, a lone half becomes U+FFFD. Dicts and lists are
    walked (frontmatter nesting is bounded by the loaders); other values are returned as is.
    """
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {mend_surrogates(k): mend_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mend_surrogates(v) for v in value]
    return value


class Yaml12SafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` with the YAML 1.2 core schema's implicit scalar types."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class-level table

    def construct_yaml_int(self, node: Any) -> int:
        """An integer of the core schema: decimal (leading zeros allowed), `0o` octal, `0x` hex."""
        value = str(self.construct_scalar(node))
        if value.startswith("0o"):
            return int(value[2:], 8)
        if value.startswith("0x"):
            return int(value[2:], 16)
        return int(value, 10)

    def construct_yaml_float(self, node: Any) -> float:
        """A float of the core schema (no `_` separators, no sexagesimal)."""
        value = str(self.construct_scalar(node)).lower()
        if value.lstrip("+-") == ".inf":
            return float("-inf") if value.startswith("-") else float("inf")
        if value == ".nan":
            return float("nan")
        return float(value)


Yaml12SafeLoader.add_constructor("tag:yaml.org,2002:int", Yaml12SafeLoader.construct_yaml_int)
Yaml12SafeLoader.add_constructor("tag:yaml.org,2002:float", Yaml12SafeLoader.construct_yaml_float)
Yaml12SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
Yaml12SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
Yaml12SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
Yaml12SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
