"""The docs page: links to the API reference and schema and to the guides, the models served (each
one's code and weights licences, whether its audio may be sold, languages, features and options:
from its spec), ready-to-run examples with the user's base URL (the key comes from the environment,
never from the page), and the WebSocket protocol and the SSML guide rendered from docs/websocket.md
and docs/ssml.md. Each guide (GUIDES: docs/api.md, docs/keys-and-limits.md, ...) is rendered the
same way on a page of its own, /dashboard/docs/<name>."""

from __future__ import annotations

import functools
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.http import Http404
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify
from markdown_it import MarkdownIt
from markdown_it.token import Token

from billing import offer
from billing.limits import limits_for
from synthesis.api.defaults import default_model
from synthesis.api.reference import GUIDES

from .. import engines
from ..access import member_required, page

DOCS_DIR = Path(settings.BASE_DIR) / "docs"

# Repository docs rendered on this page, by file name: the prefix of their heading ids and the id
# of their section. A link between them becomes a link to the heading on this page; a link to a
# guide (GUIDES, each on a page of its own whose heading ids start with its name) one to that page.
RENDERED_DOCS = {"websocket.md": ("ws-", "websocket"), "ssml.md": ("ssml-", "ssml")}


@dataclass(frozen=True)
class Heading:
    id: str
    text: str


@dataclass(frozen=True)
class RenderedDoc:
    title: SafeString  # the document's first heading, as an <h2>
    body: SafeString
    toc: tuple[Heading, ...]  # its sections (the Markdown's level-2 headings)


@dataclass(frozen=True)
class Snippet:
    id: str
    title: str
    text: str


def _plain(inline: Token) -> str:
    return "".join(child.content for child in inline.children or () if child.type in ("text", "code_inline"))


def _link_target(href: str, prefix: str, guide: str | None = None) -> str | None:
    """Where a link of the Markdown should point on the dashboard; None drops the link (keeps its text).
    `guide`: the guide being rendered on its own page; None: a doc of the Docs page.

    Absolute links and in-page anchors stay; a link to another rendered doc becomes its anchor on the
    Docs page, one to a guide a link to its page; any other relative link (a repository file the
    reader does not have) is dropped."""
    parts = urlsplit(href)
    if parts.scheme or href.startswith("//"):
        return href
    if not parts.path:
        return f"#{prefix}{parts.fragment}" if parts.fragment else None
    name = posixpath.basename(parts.path)
    if name in RENDERED_DOCS:
        other_prefix, section = RENDERED_DOCS[name]
        docs_page = "" if guide is None else reverse("dashboard:docs")
        return f"{docs_page}#{other_prefix}{parts.fragment}" if parts.fragment else f"{docs_page}#{section}"
    other = name.removesuffix(".md")
    if not name.endswith(".md") or other not in GUIDES:
        return None
    url = reverse("dashboard:guide", args=[other])
    return f"{url}#{other}-{parts.fragment}" if parts.fragment else url


def _fix_links(tokens: list[Token], prefix: str, guide: str | None = None) -> None:
    """Links pointed at the dashboard's docs, or dropped (their text kept) where they would lead
    nowhere; pictures from the repository (which the dashboard does not serve) become their text."""
    for token in tokens:
        if token.type != "inline" or not token.children:
            continue
        children: list[Token] = []
        dropping = False  # inside a link being dropped (links do not nest)
        for child in token.children:
            if child.type == "image" and not urlsplit(str(child.attrGet("src") or "")).scheme:
                child = Token("text", "", 0, content=child.content)
            elif child.type == "link_open":
                target = _link_target(str(child.attrGet("href") or ""), prefix, guide)
                if target is None:
                    dropping = True
                    continue
                child.attrSet("href", target)
            elif child.type == "link_close" and dropping:
                dropping = False
                continue
            children.append(child)
        token.children = children


def _anchor_headings(tokens: list[Token], prefix: str, down: int = 1) -> tuple[Heading, ...]:
    """Headings `down` levels down (1 on the Docs page, which has its <h1>; 0 on a guide's own page),
    each with an id and a link to itself; the table of contents: the Markdown's level-2 headings."""
    toc: list[Heading] = []
    used: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        inline = tokens[i + 1]
        text = _plain(inline)
        slug = base = prefix + (slugify(text) or "section")
        n = 2
        while slug in used:
            slug, n = f"{base}-{n}", n + 1
        used.add(slug)
        written = int(token.tag[1])
        token.tag = tokens[i + 2].tag = f"h{min(written + down, 6)}"
        token.attrSet("id", slug)
        children = inline.children or []
        if not any(child.type == "link_open" for child in children):  # a link may not hold a link
            inline.children = [
                Token("link_open", "a", 1, attrs={"href": f"#{slug}", "class": "anchor"}),
                *children,
                Token("link_close", "a", -1),
            ]
        if written == 2:
            toc.append(Heading(slug, text))
    return tuple(toc)


def _markdown() -> MarkdownIt:
    # CommonMark with raw HTML off: whatever the file holds is escaped, never passed through.
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    fence = md.renderer.rules["fence"]

    def code_block(self, tokens, idx, options, env):
        # Long lines scroll inside the block; tabindex lets a keyboard scroll it.
        return fence(tokens, idx, options, env).replace("<pre>", '<pre class="code" tabindex="0">', 1)

    def table_open(self, tokens, idx, options, env):
        return '<div class="table-wrap" tabindex="0">' + self.renderToken(tokens, idx, options, env)

    def table_close(self, tokens, idx, options, env):
        return self.renderToken(tokens, idx, options, env) + "</div>\n"

    md.add_render_rule("fence", code_block)
    md.add_render_rule("table_open", table_open)
    md.add_render_rule("table_close", table_close)
    return md


def render_markdown(text: str, prefix: str, guide: str | None = None) -> RenderedDoc:
    """`guide`: the name of the guide rendered on its own page (its title the page's <h1>); None: a
    doc of the Docs page."""
    md = _markdown()
    env: dict = {}
    tokens = md.parse(text, env)
    _fix_links(tokens, prefix, guide)
    toc = _anchor_headings(tokens, prefix, down=0 if guide else 1)
    head: list[Token] = []
    if tokens and tokens[0].type == "heading_open":
        head, tokens = tokens[:3], tokens[3:]
    render = md.renderer.render
    # Safe to mark: the renderer escapes the source (raw HTML is off) and refuses javascript: links.
    return RenderedDoc(
        title=mark_safe(render(head, md.options, env)),
        body=mark_safe(render(tokens, md.options, env)),
        toc=toc,
    )


# docs/websocket.md is written for the repository (operators' settings, its example scripts, a local
# server); a tenant reads it with this server's URL, the numbers in force, and code they can copy.
FOR_TENANTS = (
    (re.compile(r"`TTS_WS_BUFFER_BYTES` \(4 MiB\)"), lambda: f"{settings.TTS_WS_BUFFER_BYTES / 2**20:g} MiB"),
    (re.compile(r"`TTS_WS_MAX_PER_ORG`, 200 by default"), lambda: f"{settings.TTS_WS_MAX_PER_ORG} at once"),
    (re.compile(r"\nExample: `examples/[^`]+`[^\n]*\n[^\n]*\n"), lambda: ""),
    (
        re.compile(r"`examples/ws_client\.py` speaks.*?```sh\n.*?```\n", re.S),
        lambda: "The Python example at the top of this page speaks through this socket: paste it, then run it.\n",
    ),
)


def for_tenants(text: str, origin: str) -> str:
    """`origin`: this server's, as the tenant reaches it (e.g. https://tts.example.net)."""
    for pattern, said in FOR_TENANTS:
        text = pattern.sub(said().replace("\\", r"\\"), text)
    ws = origin.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    return text.replace("wss://HOST", ws).replace("https://HOST", origin).replace("ws://127.0.0.1:8000", ws)


@functools.cache
def websocket_protocol(origin: str = "http://127.0.0.1:8000") -> RenderedDoc:
    """docs/websocket.md as HTML for tenants of the server at `origin`, rendered once per process and
    origin (the file ships with the code)."""
    text = for_tenants((DOCS_DIR / "websocket.md").read_text(encoding="utf-8"), origin)
    return render_markdown(text, RENDERED_DOCS["websocket.md"][0])


@functools.cache
def ssml_guide() -> RenderedDoc:
    """docs/ssml.md as HTML: the SSML subset, what each element does per model, marks, billing."""
    text = (DOCS_DIR / "ssml.md").read_text(encoding="utf-8").replace("`docs/benchmarks.md` ", "the benchmarks ")
    return render_markdown(text, RENDERED_DOCS["ssml.md"][0])


@functools.cache
def guide_doc(name: str, origin: str = "http://localhost:8000") -> RenderedDoc:
    """docs/<name>.md, a guide of GUIDES (the caller checks: never a path from the request), as HTML
    for its own page, rendered once per process and origin, with this server's address where the
    file says localhost."""
    text = (DOCS_DIR / f"{name}.md").read_text(encoding="utf-8").replace("http://localhost:8000", origin)
    return render_markdown(text, f"{name}-", guide=name)


def snippets(base_url: str, model: str) -> list[Snippet]:
    """Examples that run as pasted once TTS_API_KEY is exported: the key is never on the page. They
    name the `model` they speak with (the organization's default), not OpenAI's `tts-1`, which means
    the same here but says nothing of it. One set: the Docs page's Quick start and a new key's panel."""
    stream_url = re.sub(r"^http", "ws", base_url) + "/audio/stream"
    eleven_http = base_url.removesuffix("/v1") + "/elevenlabs"  # ElevenLabs' wire (docs/elevenlabs.md)
    eleven_ws, voice = re.sub(r"^http", "ws", eleven_http), "alloy"
    return [
        Snippet("snippet-env", "Your key in the environment", 'export TTS_API_KEY="paste your API key here"'),
        Snippet(
            "snippet-curl",
            "curl",
            f'curl "{base_url}/audio/speech" \\\n'
            '  -H "Authorization: Bearer $TTS_API_KEY" \\\n'
            '  -H "Content-Type: application/json" \\\n'
            f"""  -d '{{"model": "{model}", "input": "Hello!", "voice": "alloy", "response_format": "mp3"}}' \\\n"""
            "  -o hello.mp3",
        ),
        Snippet(
            "snippet-python",
            "Python (openai SDK)",
            "import os\n\n"
            "from openai import OpenAI\n\n"
            f'client = OpenAI(base_url="{base_url}", api_key=os.environ["TTS_API_KEY"])\n'
            "with client.audio.speech.with_streaming_response.create(\n"
            f'    model="{model}", voice="alloy", input="Hello!", response_format="mp3"\n'
            ") as response:\n"
            '    response.stream_to_file("hello.mp3")',
        ),
        Snippet(
            "snippet-websocket",
            "Python (WebSocket, websockets package)",
            "import asyncio\nimport json\nimport os\n\nimport websockets\n\n\n"
            "async def main():\n"
            '    headers = {"Authorization": f"Bearer {os.environ[\'TTS_API_KEY\']}"}\n'
            f'    async with websockets.connect("{stream_url}", additional_headers=headers) as ws:\n'
            '        print(await ws.recv())  # {"type": "ready", ...}\n'
            '        await ws.send(json.dumps({"type": "synthesize", "id": "u1", "text": "Hello!", "format": "wav"}))\n'
            '        with open("hello.wav", "wb") as out:\n'
            "            while True:\n"
            "                frame = await ws.recv()\n"
            "                if isinstance(frame, bytes):\n"
            "                    out.write(frame)\n"
            "                    continue\n"
            "                print(frame)\n"
            '                if json.loads(frame)["type"] in ("end", "error"):\n'
            "                    break\n\n\n"
            "asyncio.run(main())",
        ),
        Snippet(
            "snippet-pipecat",
            "Pipecat voice agent (ElevenLabs' wire)",
            "import os\n\nfrom pipecat.services.elevenlabs.tts import ElevenLabsTTSService\n\n"
            "tts = ElevenLabsTTSService(\n"
            '    api_key=os.environ["TTS_API_KEY"],\n'
            f'    url="{eleven_ws}",\n'
            f'    settings=ElevenLabsTTSService.Settings(voice="{voice}", model="{model}"),\n'
            ")",
        ),
        Snippet(
            "snippet-livekit",
            "LiveKit Agents (ElevenLabs' wire)",
            "import os\n\nfrom livekit.plugins import elevenlabs\n\n"
            "tts = elevenlabs.TTS(\n"
            '    api_key=os.environ["TTS_API_KEY"],\n'
            f'    base_url="{eleven_http}/v1",\n'
            f'    voice_id="{voice}",\n'
            f'    model="{model}",\n'
            ")",
        ),
    ]


@member_required
def docs(request):
    base_url = request.build_absolute_uri("/v1")
    model = default_model(request.principal.organization)
    allowed = {spec.name for spec in offer.allowed_specs(limits_for(request.principal.organization))}
    return page(
        request,
        "docs.html",
        "docs",
        base_url=base_url,
        models=[engines.card(spec, spec.name in allowed) for spec in offer.served()],
        default_model=model,
        snippets=snippets(base_url, model),
        guides=[(name, title, what) for name, (title, what) in GUIDES.items()],
        protocol=websocket_protocol(request.build_absolute_uri("/").rstrip("/")),
        ssml=ssml_guide(),
    )


@member_required
def guide_page(request, name: str):
    """A guide on a page of its own: only the names GUIDES lists (a fixed set of files)."""
    if name not in GUIDES:
        raise Http404("No such guide.")
    return page(
        request,
        "guide.html",
        "docs",
        title=GUIDES[name][0],
        doc=guide_doc(name, request.build_absolute_uri("/").rstrip("/")),
    )
