"""SSML in: the subset that telephony and the big clouds' clients send, parsed safely into a flat
list of what to say, how, and where to pause or mark.

The parser is defusedxml's (expat underneath): no DTD, no entity declared, no external reference
is ever read, so the XML bombs and external-entity payloads fail at once with a 400; the element
count and depth are bounded while parsing, the breaks' total after. Every element and attribute
outside the subset is refused by name with its line and column — never read aloud, never dropped.

What each element becomes (`Words`, `Pause`, `Mark`, `Edge`, each with the `Style` of its span):
`p`/`s` an edge between sentences (a paragraph's pause longer), `break` a pause, `say-as` words
(`inference.text.sayas`), `sub` its alias, `phoneme` a phoneme link `[word](/phonemes/)` for a model
that reads phonemes or its written word for one that reads text, `prosody`/`emphasis` a rate,
volume and pitch for the span, `lang` a language for the span, `voice` another voice of the model,
`mark` a named point. `inference.text.ssml_text` cuts the result into segments. Pure Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .numbers import HAN, KANA, latin_language
from .sayas import DATE_FORMATS, KINDS, SayAsError, say_as
from .ssml_subset import ATTRIBUTES, BREAK_STRENGTHS, EMPHASIS, XML_LANG, Style, prosody
from .ssml_xml import PRIVATE, Node, SsmlError, is_ssml, parse_tree

__all__ = ["PRIVATE", "SsmlError", "is_ssml", "parse", "Document", "Style", "Words", "Pause", "Mark", "Edge"]

MAX_BREAK_MS = 10_000  # one break
MAX_TOTAL_BREAK_MS = 120_000  # all the breaks of one input
PARAGRAPH_PAUSE_MS = 400
MAX_MARKS = 500
MAX_MARK_NAME = 128


@dataclass(frozen=True)
class Words:
    spoken: str  # what the model reads (a phoneme link for a model that reads phonemes)
    shown: str  # as written (captions)
    style: Style
    fixed: bool = False  # from say-as, sub or phoneme: lexicons leave it as it is
    billed: int = 0  # characters spoken (the alias of a sub, the text of the others)


@dataclass(frozen=True)
class Pause:
    ms: int


@dataclass(frozen=True)
class Mark:
    name: str


@dataclass(frozen=True)
class Edge:
    paragraph: bool


Item = Words | Pause | Mark | Edge


@dataclass
class Document:
    items: list[Item] = field(default_factory=list)
    lang: str = ""  # the root's xml:lang
    voices: dict[str, tuple[int, int]] = field(default_factory=dict)  # each <voice name> and where it is first

    @property
    def billed(self) -> int:
        """The characters spoken: the text (spaces between words once), a sub's alias, what say-as
        and phoneme hold as written; no markup, no break."""
        said = "".join(
            ("\0" * i.billed if i.fixed else i.spoken) if isinstance(i, Words) else "" if isinstance(i, Mark) else " "
            for i in self.items
        )
        return len(re.sub(r"\s+", " ", said).strip())


class _Walk:
    def __init__(self, model: str, phonemes: frozenset[str], languages: tuple[str, ...]):
        self.model, self.phonemes, self.languages = model, phonemes, languages
        self.doc = Document()
        self.breaks = 0
        self.marks = 0
        self.text_lang = "en"  # the text's own language (`_text_lang`): say-as's where no xml:lang says

    def fail(self, node: Node, message: str) -> SsmlError:
        return SsmlError(message, node.line, node.column)

    def check_attrs(self, node: Node) -> None:
        allowed = ATTRIBUTES.get(node.tag)
        if allowed is None:
            raise self.fail(
                node,
                f"<{_name(node.tag)}> is not supported by model '{self.model}'; it takes "
                f"{', '.join('<' + t + '>' for t in ATTRIBUTES)}.",
            )
        for attr in node.attrs:
            if attr not in allowed:
                raise self.fail(
                    node, f"attribute '{_name(attr)}' of <{node.tag}> is not supported by model '{self.model}'."
                )

    def lang(self, node: Node, tag: str) -> str:
        base = tag.lower().split("-")[0]
        if not re.fullmatch(r"[a-zA-Z]{2,3}(-[a-zA-Z0-9]{1,8})*", tag):
            raise self.fail(node, f"xml:lang '{tag}' is not a language tag (e.g. en-US, fr).")
        if base not in self.languages:
            raise self.fail(
                node, f"model '{self.model}' does not speak '{tag}'; it speaks {', '.join(self.languages)}."
            )
        return tag

    def text(self, raw: str, style: Style) -> None:
        text = PRIVATE.sub("", re.sub(r"\s+", " ", raw))
        if text:
            self.doc.items.append(Words(text, text, style, billed=len(text.strip())))

    def walk(self, node: Node, style: Style) -> None:
        self.check_attrs(node)
        handler = getattr(self, "on_" + node.tag.replace("-", "_"))
        handler(node, style)

    def children(self, node: Node, style: Style) -> None:
        for child in node.children:
            if isinstance(child, str):
                self.text(child, style)
            else:
                self.walk(child, style)

    def inner_text(self, node: Node) -> str:
        for child in node.children:
            if not isinstance(child, str):
                raise self.fail(child, f"<{_name(child.tag)}> may not be inside <{node.tag}> (text only).")
        return PRIVATE.sub("", re.sub(r"\s+", " ", "".join(node.children))).strip()  # type: ignore[arg-type]

    def on_speak(self, node: Node, style: Style) -> None:
        if XML_LANG in node.attrs:
            self.doc.lang = self.lang(node, node.attrs[XML_LANG])
        self.children(node, style)

    def on_p(self, node: Node, style: Style) -> None:
        self.doc.items.append(Edge(paragraph=node.tag == "p"))
        if XML_LANG in node.attrs:
            style = replace(style, lang=self.lang(node, node.attrs[XML_LANG]))
        self.children(node, style)
        self.doc.items.append(Edge(paragraph=node.tag == "p"))

    on_s = on_p

    def on_break(self, node: Node, style: Style) -> None:
        if node.children:
            raise self.fail(node, '<break> is empty: write <break time="500ms"/>.')
        ms = BREAK_STRENGTHS["medium"]
        if "strength" in node.attrs:
            if node.attrs["strength"] not in BREAK_STRENGTHS:
                raise self.fail(
                    node, f"break strength '{node.attrs['strength']}' is not one of {', '.join(BREAK_STRENGTHS)}."
                )
            ms = BREAK_STRENGTHS[node.attrs["strength"]]
        if "time" in node.attrs:
            match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*", node.attrs["time"])
            if not match:
                raise self.fail(node, f"break time '{node.attrs['time']}' is not a duration (e.g. 500ms, 1.5s).")
            ms = round(float(match.group(1)) * (1000 if match.group(2) == "s" else 1))
            if ms > MAX_BREAK_MS:
                raise self.fail(node, f"break time '{node.attrs['time']}' is over {MAX_BREAK_MS // 1000} s.")
        self.breaks += ms
        if self.breaks > MAX_TOTAL_BREAK_MS:
            raise self.fail(node, f"the breaks add up to more than {MAX_TOTAL_BREAK_MS // 1000} s.")
        self.doc.items.append(Pause(ms))

    def on_mark(self, node: Node, style: Style) -> None:
        name = node.attrs.get("name", "")
        if not name.strip() or node.children:
            raise self.fail(node, '<mark> needs a name and no content: <mark name="here"/>.')
        if len(name) > MAX_MARK_NAME:
            raise self.fail(node, f"a mark's name is at most {MAX_MARK_NAME} characters.")
        self.marks += 1
        if self.marks > MAX_MARKS:
            raise self.fail(node, f"more than {MAX_MARKS} marks.")
        self.doc.items.append(Mark(name))

    def on_say_as(self, node: Node, style: Style) -> None:
        kind = node.attrs.get("interpret-as", "")
        if kind not in KINDS:
            raise self.fail(
                node,
                f"say-as interpret-as '{kind}' is not supported by model '{self.model}'; it takes {', '.join(KINDS)}.",
            )
        fmt = node.attrs.get("format", "")
        if fmt and kind != "date":
            raise self.fail(node, f'say-as format is for dates only (interpret-as="date" format="mdy"), not {kind}.')
        if fmt and fmt not in DATE_FORMATS:
            raise self.fail(node, f"date format '{fmt}' is not one of {', '.join(DATE_FORMATS)}.")
        written = self.inner_text(node)
        if not written:
            raise self.fail(node, "<say-as> has nothing inside.")
        try:
            spoken = say_as(written, kind, fmt, style.lang or self.doc.lang or self.text_lang)
        except SayAsError as exc:
            raise self.fail(node, str(exc)) from None
        self.doc.items.append(Words(spoken, written, style, fixed=True, billed=len(written)))

    def on_sub(self, node: Node, style: Style) -> None:
        alias = PRIVATE.sub("", re.sub(r"\s+", " ", node.attrs.get("alias", ""))).strip()
        if not alias:
            raise self.fail(node, '<sub> needs an alias: <sub alias="World Wide Web">WWW</sub>.')
        self.doc.items.append(Words(alias, self.inner_text(node) or alias, style, fixed=True, billed=len(alias)))

    def on_phoneme(self, node: Node, style: Style) -> None:
        alphabet, ph = node.attrs.get("alphabet", "ipa"), node.attrs.get("ph", "").strip()
        written = self.inner_text(node)
        if alphabet != "ipa":
            raise self.fail(node, f"phoneme alphabet '{alphabet}' is not supported by model '{self.model}'; use ipa.")
        if not ph:
            raise self.fail(node, "<phoneme> needs ph, the pronunciation in IPA.")
        if not self.phonemes:
            if not written:
                raise self.fail(
                    node,
                    f"model '{self.model}' reads text, not phonemes: put the word inside "
                    '<phoneme> (it is read as written) or use <sub alias="...">.',
                )
            self.doc.items.append(Words(written, written, style, fixed=True, billed=len(written)))
            return
        if re.search(r"[\[\]()/]", written + ph) or len(ph) > 200 or len(written) > 100:
            raise self.fail(node, "<phoneme>'s word and ph may not hold [ ] ( ) / (ph up to 200 symbols).")
        ph = _ipa(ph)
        unknown = sorted({ch for ch in ph if ch not in self.phonemes})
        if unknown:
            raise self.fail(
                node,
                f"ph '{ph}' has symbols model '{self.model}' does not read: {' '.join(unknown)} "
                "(it reads misaki's IPA: e.g. kˈOkəɹO, təmˈɑːtoʊ).",
            )
        word = written or ph
        # Billed by what is said: the phonemes when they are longer than the word they stand for.
        billed = max(len(word), len(ph.replace("ˈ", "").replace("ˌ", "").replace("ː", "")))
        self.doc.items.append(Words(f"[{word}](/{ph}/)", word, style, fixed=True, billed=billed))

    def on_prosody(self, node: Node, style: Style) -> None:
        if not node.attrs:
            raise self.fail(node, "<prosody> needs rate, pitch or volume.")
        for attr, value in node.attrs.items():
            try:
                style = prosody(style, attr, value.strip())
            except ValueError as exc:
                raise self.fail(node, str(exc)) from None
        self.children(node, style)

    def on_emphasis(self, node: Node, style: Style) -> None:
        level = node.attrs.get("level", "moderate")
        if level not in EMPHASIS:
            raise self.fail(node, f"emphasis level '{level}' is not one of {', '.join(EMPHASIS)}.")
        rate, db = EMPHASIS[level]
        self.children(node, replace(style, rate=style.rate * rate, volume_db=style.volume_db + db))

    def on_lang(self, node: Node, style: Style) -> None:
        if XML_LANG not in node.attrs:
            raise self.fail(node, '<lang> needs xml:lang, e.g. <lang xml:lang="fr-FR">.')
        self.children(node, replace(style, lang=self.lang(node, node.attrs[XML_LANG])))

    def on_voice(self, node: Node, style: Style) -> None:
        name = node.attrs.get("name", "").strip()
        if not name:
            raise self.fail(node, "<voice> needs a name: another voice of this model.")
        self.doc.voices.setdefault(name, (node.line, node.column))
        self.children(node, replace(style, voice=name))


def _name(tag: str) -> str:
    """A tag or attribute as its writer knows it ("{ns}effect" from another vocabulary: "effect")."""
    return tag.rsplit("}", 1)[-1] if tag.startswith("{") else tag


def _text_lang(node: Node) -> str:
    """The language the document's text is written in, for say-as where no xml:lang says: Japanese by
    its kana, Chinese by its characters, a Latin-script language by its common words, else English."""
    parts: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        for child in current.children:
            (parts.append(child) if isinstance(child, str) else stack.append(child))
    text = " ".join(parts)
    if KANA.search(text):
        return "ja"
    if HAN.search(text):
        return "zh"
    guess = latin_language(text)  # by common words: trusted for the languages say-as speaks beside English
    return guess if guess in ("es", "fr", "de", "it", "pt") else "en"


# IPA as written elsewhere, in the symbols a phoneme reader takes: tie bars joined, ASCII g.
_IPA = {"t͡ʃ": "ʧ", "d͡ʒ": "ʤ", "t͡s": "ʦ", "d͡z": "ʣ", "t͡ɕ": "ʨ", "d͡ʑ": "ʥ", "tʃ": "ʧ", "dʒ": "ʤ", "g": "ɡ", "ɝ": "ɜɹ"}


def _ipa(ph: str) -> str:
    for written, symbol in _IPA.items():
        ph = ph.replace(written, symbol)
    return ph


def parse(text: str, model: str, phonemes: frozenset[str], languages: tuple[str, ...]) -> Document:
    """`text` (SSML) as a `Document` for a model that reads the `phonemes` symbols (none: it reads
    text) and speaks `languages`; SsmlError says where and what is wrong."""
    root = parse_tree(text)
    walk = _Walk(model, phonemes, languages)
    guess = _text_lang(root)
    walk.text_lang = guess if guess.split("-")[0] in languages else "en"
    walk.walk(root, Style())
    if not any(isinstance(i, Words) and i.spoken.strip() for i in walk.doc.items):
        raise SsmlError("there is nothing to say (no text outside the markup).")
    return walk.doc
