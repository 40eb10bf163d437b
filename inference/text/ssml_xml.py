"""SSML's XML, read safely: defusedxml's parser (expat underneath) with no DTD, no entity and no
external reference, building a small tree whose every element knows its line and column, bounded
in elements and depth while it is read. Pure Python."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser, ParseError

from .preparation import TextError
from .ssml_subset import SSML_NS

MAX_ELEMENTS = 2000
MAX_DEPTH = 24
# Characters the preparation gives meanings to inside prepared text (marks, fixed spans): never
# taken from the input.
PRIVATE = re.compile("[\U000f0000-\U0010ffff]")


class SsmlError(TextError):
    """SSML that cannot be spoken: where (line, column) and what is wrong."""

    code = "invalid_ssml"

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.line, self.column = line, column
        where = f"line {line}, column {column}: " if line is not None else ""
        super().__init__(f"Invalid SSML: {where}{message}")


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    line: int
    column: int
    children: list[Node | str] = field(default_factory=list)


class _Builder:
    """The parser's target: a tree of `Node`s with their positions, bounded as it grows."""

    def __init__(self, place) -> None:
        self.place = place  # the parser's (line, column) as the input was sent
        self.parser: DefusedXMLParser | None = None
        self.stack: list[Node] = []
        self.root: Node | None = None
        self.count = 0

    def _where(self) -> tuple[int, int]:
        expat = self.parser.parser  # type: ignore[union-attr]
        return self.place(expat.CurrentLineNumber, expat.CurrentColumnNumber + 1)

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        line, column = self._where()
        self.count += 1
        if self.count > MAX_ELEMENTS:
            raise SsmlError(f"more than {MAX_ELEMENTS} elements.", line, column)
        if len(self.stack) >= MAX_DEPTH:
            raise SsmlError(f"elements nested more than {MAX_DEPTH} deep.", line, column)
        node = Node(tag.removeprefix(SSML_NS), dict(attrs), line, column)
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)

    def end(self, tag: str) -> None:
        self.stack.pop()

    def data(self, text: str) -> None:
        if self.stack:
            self.stack[-1].children.append(text)

    def close(self) -> Node | None:
        return self.root


# How an SSML document may begin: its root, or the XML declaration several SSML producers write
# before it; a DOCTYPE too, so that it is refused as SSML (no DTD) rather than read aloud as text.
SSML_STARTS = ("<speak", "<?xml", "<!DOCTYPE")
LEAD = "\ufeff \t\r\n"  # what may come before it: a byte order mark, white space


def is_ssml(text: str, input_format: str | None = None) -> bool:
    """A request is SSML when it says so, or (saying nothing) when its input starts with <speak, an
    XML declaration or a DOCTYPE (a byte order mark and white space before it aside)."""
    if input_format:
        return input_format == "ssml"
    return text.lstrip(LEAD).startswith(SSML_STARTS)


def parse_tree(text: str) -> Node:
    """The document's tree; a fragment without <speak> (what Twilio's <Say> holds) is wrapped in one.
    Every line and column told is the input's as sent (its leading spaces and the wrapper aside)."""
    lead = text[: len(text) - len(text.lstrip(LEAD))]
    body = text.strip(LEAD)
    wrapped = not body.startswith(SSML_STARTS)
    if wrapped:
        body = f"<speak>{body}</speak>"
    lines = lead.count("\n")
    first = len(lead) - (lead.rfind("\n") + 1) - (len("<speak>") if wrapped else 0)  # columns before line 1

    def place(line: int, column: int) -> tuple[int, int]:
        return line + lines, max(1, column + first) if line == 1 else column

    builder = _Builder(place)
    parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    builder.parser = parser
    try:
        parser.feed(body)
        root = parser.close()
    except ParseError as exc:
        line, column = place(exc.position[0], exc.position[1] + 1)
        raise SsmlError(f"not well-formed XML ({str(exc).split(':')[0]}).", line, column) from None
    except DefusedXmlException as exc:
        what = type(exc).__name__.replace("Forbidden", "").replace("Reference", " reference")
        raise SsmlError(f"{what.lower()}s are not allowed in SSML (no DTD, entity or external reference).") from None
    if root is None or root.tag != "speak":
        raise SsmlError("the root element must be <speak>.", *place(1, 1))
    return root
