"""YAML configuration read as plain data: the one loader of every YAML file gpucast reads (the GPU
inventory, mapping files, `sources.yaml`).

Nothing in a file is ever constructed as a Python object by tag: the text is composed into YAML nodes
(`yaml.compose`; an alias is the node its anchor names, shared, not copied), every node's tag must be a
plain YAML type (`PLAIN_TAGS`), and a value is built only from a node whose expansion holds at most
`MAX_VALUES` values. An alias bomb (anchors nested 9 deep in a 442-byte `sources.yaml`) composes into a
few dozen nodes, and would expand to hundreds of millions of values: it is refused by counting, before
anything is built (building it made a 2.8 GB string and took the night down).

Every reader opens its file with `read_config` (not found, unreadable, not UTF-8, not YAML: one line each) and
names a place in it as `where` does, `file:line` (what editors and compilers print), so an error in any
configuration file reads `sources.yaml:7: <the rule>`. A key given twice in one mapping is refused there too, for
every file alike (YAML loaders keep the last one silently: two `queues:` blocks dropped the first, `{count: 48,
count: 2}` owned 2). `name_problem` is the rule for names a file defines (the inventory's queues and GPU types).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml

# The plain YAML types a value may have; any other tag (`!!python/...`, `!!binary`, `!custom`) is refused.
PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "str", "timestamp", "map",
                                                           "seq"))
MAX_VALUES = 10_000  # values one entry of a configuration file may expand to: far above any real file


class YamlRefused(ValueError):
    """Text that is not plain YAML configuration: `line` (1-based) and the `problem` in words."""

    def __init__(self, line: int, problem: str):
        super().__init__(f"line {line}: {problem}")
        self.line, self.problem = line, problem


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def where(path: str | Path, line: int) -> str:
    """A place in a configuration file, as every reader names it: `file:line`."""
    return f"{path}:{line}"


def read_config(path: str | Path, error: type[ValueError], what: str, docs: str) -> tuple[yaml.Node | None, bytes]:
    """The one way gpucast opens a YAML configuration file: (its node tree, None when empty; its bytes).
    A missing file is `FileNotFoundError` ("<what> <file> not found"); a file that cannot be read, is not UTF-8
    (a BOM is allowed) or is not YAML is `error` with one line naming `file:line` and pointing at `docs`."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} not found") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise error(f"{where(path, line)}: not UTF-8 text; save the {what} as UTF-8 YAML ({docs})") from None
    try:
        return compose(text), data
    except YamlRefused as exc:
        raise error(f"{where(path, exc.line)}: {exc.problem} ({docs})") from None


def compose(text: str) -> yaml.Node | None:
    """The text's YAML node tree (None for an empty document); `YamlRefused` for text YAML cannot parse, or with a
    key given twice in one mapping (`repeated_key`)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
        raise YamlRefused(mark.line + 1 if mark is not None else 1, f"not valid YAML: {problem}") from None
    except (ValueError, RecursionError) as exc:  # text PyYAML cannot take at all (a NUL character, 10,000 `[`)
        raise YamlRefused(1, f"not valid YAML: {type(exc).__name__}") from None
    if root is not None and (twice := repeated_key(root)) is not None:
        again, first = twice
        raise YamlRefused(line_of(again), f"{shown_key(again.value)} is given twice in one mapping (first on line "
                                          f"{line_of(first)}); keep one: YAML would silently keep only the last")
    return root


def repeated_key(root: yaml.Node) -> tuple[yaml.ScalarNode, yaml.ScalarNode] | None:
    """The first key written twice in one mapping (its second node, its first), or None. Keys are the same when
    their text and tag are (`count` and `"count"` are; `1` and `"1"` are not); checked iteratively, each node once."""
    todo, seen = [root], set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: dict[tuple[str, str], yaml.ScalarNode] = {}
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if (key.tag, key.value) in keys:
                        return key, keys[key.tag, key.value]
                    keys[key.tag, key.value] = key
            todo += [n for pair in reversed(node.value) for n in reversed(pair)]
        elif isinstance(node, yaml.SequenceNode):
            todo += reversed(node.value)
    return None


# Scripts whose letters look alike (`gpу` is two Latin letters and a Cyrillic one). A name may use any one script;
# mixing these is refused. Whole names in one other script that look Latin are not caught: the plan's note names
# an inventory queue no job uses.
CONFUSABLE_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")


def name_problem(text: str) -> str | None:
    """Why `text` cannot be a name a file defines (a queue, a GPU type), else None: it must not begin or end with
    white space, hold a control, format or other invisible character (a space is the only blank allowed inside),
    or mix letters of the look-alike scripts `CONFUSABLE_SCRIPTS`. Such a name is a different queue from the one
    the job logs name, while looking the same."""
    if text != text.strip():
        return "begins or ends with white space"
    for ch in text:
        if ch != " " and unicodedata.category(ch)[0] in "CZ":
            return f"holds an invisible or control character (U+{ord(ch):04X})"
    scripts = sorted({unicodedata.name(ch, "").split(" ")[0] for ch in text if ch.isalpha()} & set(CONFUSABLE_SCRIPTS))
    if len(scripts) > 1:
        return f"mixes {' and '.join(s.title() for s in scripts)} letters (a look-alike of a name?)"
    return None


def shown_key(text: str) -> str:
    """A key of the file in a message: quoted when it reads as a name (letters, digits, `_ -.`, at most 40
    characters), else only described. A file given where a configuration file was expected (a sources.yaml
    `mapping: /etc/shadow`) must not have its lines copied into run messages that planners read."""
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_ .\-]{0,39}", text):
        return repr(text)
    return f"(a {len(text)}-character key that is not a name: is this the right file?)"


def shown_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag


def first_unplain(root: yaml.Node) -> yaml.Node | None:
    """The first node (depth first) whose tag is not a plain YAML type, or None (iteratively: aliases share nodes)."""
    todo, seen = [root], set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.tag not in PLAIN_TAGS:
            return node
        if isinstance(node, yaml.MappingNode):
            todo += [n for pair in reversed(node.value) for n in reversed(pair)]
        elif isinstance(node, yaml.SequenceNode):
            todo += reversed(node.value)
    return None


def expanded_size(root: yaml.Node, limit: int = MAX_VALUES) -> int:
    """How many values the node tree holds once every alias is expanded, counted without expanding it
    (each shared node once, times its uses); `limit + 1` as soon as it passes `limit`, or when an alias
    names a node that holds it (a recursive structure never ends)."""
    sizes: dict[int, int] = {}
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while todo:
        node, done = todo.pop()
        if id(node) in sizes:
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done:
            open_.discard(id(node))
            sizes[id(node)] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        if id(node) in open_:
            return limit + 1  # recursive: a node reached again inside itself
        open_.add(id(node))
        todo.append((node, True))
        for child in children:
            if id(child) in open_:
                return limit + 1
            if id(child) not in sizes:
                todo.append((child, False))
    return sizes[id(root)]


def plain_value(node: yaml.Node, limit: int = MAX_VALUES) -> Any:
    """A node as plain Python values (dict, list, str, int, float, bool, None, datetime); `YamlRefused`
    naming the node's line for a tag that is not plain or for more than `limit` values once expanded."""
    if (bad := first_unplain(node)) is not None:
        raise YamlRefused(line_of(bad), f"tag {shown_tag(bad.tag)} is not allowed: write plain values")
    if expanded_size(node, limit) > limit:
        raise YamlRefused(line_of(node), f"expands to more than {limit:,} values (YAML anchors and aliases nested "
                                         "inside each other?); write the values out")
    try:
        return yaml.SafeLoader("").construct_document(node)
    except yaml.YAMLError as exc:  # an explicit tag on text it cannot read: `!!int x`
        mark = getattr(exc, "problem_mark", None)
        raise YamlRefused(mark.line + 1 if mark is not None else line_of(node),
                          f"not a valid value ({getattr(exc, 'problem', None) or type(exc).__name__})") from None
