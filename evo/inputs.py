"""What evo reads from users' files: UTF-8 text of a bounded size, and YAML without its surprises.

Each problem is a :class:`InputError`, one line naming the file (the config, profile and idea readers turn it into
their own error types). YAML here refuses duplicate keys (PyYAML keeps the last one silently) and aliases (``*a``:
nothing a campaign config needs, and their expansion is unbounded: a few lines can stand for 10^6 values).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

CONFIG_LIMIT = 1 << 20  # bytes of a config or profile
PATCH_LIMIT = 1 << 20  # bytes of an idea patch: a kernel's real change is a few kB
NAME_LIMIT = 128  # characters of a campaign or geometry name (a folder name; file systems take 255 bytes)
KERNEL_LIMIT = 16 << 20  # bytes of a kernel file `evo new` reads (engines' largest single .cu files are ~2 MB)
YAML_DEPTH = 64  # nesting of YAML collections: a campaign config nests 4 deep; PyYAML recurses per level
NUMBER_DIGITS = 1000  # characters of one YAML number (Python refuses ints of over 4300 digits with a traceback)


class InputError(ValueError):
    """A file that is not what evo can read (one line)."""


def decode_text(data: bytes, where: str, limit: int) -> str:
    """``data`` as UTF-8 text (a UTF-8 byte-order mark is dropped); InputError if binary, not UTF-8, or too big."""
    if len(data) > limit:
        raise InputError(f"{where}: {len(data)} bytes, more than the {limit} a file of this kind may have")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{where}: UTF-16 text; save it as UTF-8")
    if b"\x00" in data:
        raise InputError(f"{where}: binary data (a NUL byte), not text; give a UTF-8 text file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(
            f"{where}: not UTF-8 text (byte 0x{data[e.start]:02x} at line {line}); save it as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def read_text(path: str | Path, limit: int = CONFIG_LIMIT) -> str:
    """A user's text file, checked as :func:`decode_text`; OSError passes through."""
    p = Path(path)
    with open(p, "rb") as f:
        data = f.read(limit + 1)
    return decode_text(data, str(p), limit)


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys, aliases, collections nested deeper than YAML_DEPTH (PyYAML
    composes recursively: 100k levels were a RecursionError) and numbers longer than NUMBER_DIGITS."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            ev = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"an alias (*{ev.anchor}) is not allowed here; write the value out", ev.start_mark
            )
        if self._depth >= YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested more than {YAML_DEPTH} levels deep", self.peek_event().start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _short_number(self, node: Any) -> None:
        if len(str(node.value)) > NUMBER_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"a number of {len(str(node.value))} characters (at most {NUMBER_DIGITS})", node.start_mark
            )

    def construct_yaml_int(self, node: Any) -> Any:
        self._short_number(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: Any) -> Any:
        self._short_number(node)
        return super().construct_yaml_float(node)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key!r} (first given at line {first}; only one may be)",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass


def yaml_problem(e: yaml.YAMLError) -> str:
    """' at line L, column C: problem' for a YAML error."""
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return f"{where}: {problem}"


def finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
