"""The dashboard's docs page and the API reference through Django's test client: the WebSocket
protocol rendered from its Markdown (headings with anchors, tables, code blocks, a table of
contents), examples with the real base URL and the key read from the environment (each with a
Copy button), and a reference page whose every asset this server serves itself."""

from __future__ import annotations

import html
import json
import re
import shlex
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest

from accounts.models import Organization
from billing import offer
from dashboard.views.docs import render_markdown, websocket_protocol

pytestmark = pytest.mark.django_db

SNIPPETS = ("snippet-env", "snippet-curl", "snippet-python", "snippet-websocket", "snippet-pipecat", "snippet-livekit")


class Elements(HTMLParser):
    """Every element of a page with its attributes and text; <style> bodies kept apart."""

    VOID = {"meta", "link", "img", "br", "hr", "input", "source", "area", "base", "col", "embed", "wbr"}

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[dict] = []
        self.styles: list[str] = []
        self._open: list[dict] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for element in self._open:
            element["text"] += data
        if self._open and self._open[-1]["tag"] == "style":
            self.styles.append(data)

    def find(self, tag: str, **attrs) -> list[dict]:
        return [
            e
            for e in self.elements
            if e["tag"] == tag and all(e["attrs"].get(k.rstrip("_")) == v for k, v in attrs.items())
        ]

    def one(self, tag: str, **attrs) -> dict:
        found = self.find(tag, **attrs)
        assert len(found) == 1, (tag, attrs, found)
        return found[0]


def signup(client, email="ada@example.com", org="Analytical Engines"):
    response = client.post(
        "/dashboard/signup", {"email": email, "password": "correct horse battery", "organization": org}
    )
    assert response.status_code == 302


def docs_page(client, **extra) -> tuple[str, Elements]:
    response = client.get("/dashboard/docs", **extra)
    assert response.status_code == 200
    markup = response.content.decode()
    return markup, Elements(markup)


def test_the_websocket_protocol_is_rendered_as_html_with_anchors_and_contents(client):
    signup(client)
    markup, page = docs_page(client)
    section = page.one("section", id="websocket")["text"]
    title = page.one("h2", id="ws-websocket-streaming-protocol-ttsv1-and-ttsv2")
    assert title["text"] == "WebSocket streaming protocol — tts.v1 and tts.v2"
    # The file's sections are <h3>s under the page's <h1>/<h2>, each linking to itself, listed on top.
    sections = [(h["text"], h["attrs"]["id"]) for h in page.find("h3") if h["attrs"].get("id", "").startswith("ws-")]
    assert [text for text, _ in sections] == [
        "Connecting",
        "Client → server (JSON text frames, at most 64 KiB each)",
        "Server → client",
        "Text streamed in (tts.v2)",
        "Close codes",
        "Example",
    ]
    assert '<h3 id="ws-close-codes"><a href="#ws-close-codes" class="anchor">Close codes</a></h3>' in markup
    toc = Elements(re.search(r'<nav class="toc".*?</nav>', markup, re.S).group(0))
    assert [(a["text"], a["attrs"]["href"]) for a in toc.find("a")] == [(text, f"#{id_}") for text, id_ in sections]
    # Tables are tables (scrolling in their own box on a phone), code blocks are code blocks.
    tables = page.find("table")
    assert len(tables) == 3 + 1  # the protocol's, and the SSML guide's below it
    first_cell = page.find("td")[0]["text"]
    assert first_cell == (
        '{"type": "synthesize", "id": "u1", "model": "kokoro", "text": "…", "voice": "af_heart", "format": "pcm", …}'
    )
    assert any(td["text"] == "4008" for td in page.find("td"))
    assert markup.count('<div class="table-wrap" tabindex="0"><table>') == 3 + 1
    assert page.find("code", **{"class": "language-json"})[0]["text"].strip() == (
        '{"type": "ready", "protocol": "tts.v1", "sample_rate": 24000}'
    )
    # No Markdown left over.
    for raw in ("```", "## ", "|---|", "| code | why |", "**Versions.**", "`tts.v2`"):
        assert raw not in section, raw
    assert "<strong>Versions.</strong>" in markup


def test_the_examples_use_the_real_base_url_and_the_key_from_the_environment(client):
    signup(client)
    key, raw = Organization.objects.get().create_api_key("docs")
    markup, page = docs_page(client)
    assert key.prefix not in markup and raw not in markup  # no key, not even a shortened one
    text = {name: page.one("code", id=name)["text"] for name in SNIPPETS}
    assert not any("…" in t for t in text.values())
    assert text["snippet-env"].startswith("export TTS_API_KEY=")

    curl = shlex.split(text["snippet-curl"].replace("\\\n", " "))
    assert curl[:2] == ["curl", "http://testserver/v1/audio/speech"]
    assert curl[curl.index("-H") + 1] == "Authorization: Bearer $TTS_API_KEY"
    assert "$TTS_API_KEY" in text["snippet-curl"]  # unquoted by the shell: read from the environment
    body = json.loads(curl[curl.index("-d") + 1])
    # The model it speaks with, by name (before: "tts-1", which says nothing of it; the keys page's curl named none).
    default = offer.default_spec().name
    assert body == {"model": default, "input": "Hello!", "voice": "alloy", "response_format": "mp3"}
    assert curl[-2:] == ["-o", "hello.mp3"]

    python = text["snippet-python"]
    compile(python, "snippet-python", "exec")
    assert 'OpenAI(base_url="http://testserver/v1", api_key=os.environ["TTS_API_KEY"])' in python
    assert f'model="{default}"' in python
    # One set everywhere: a new key's panel shows the very same curl and Python.
    client.post("/dashboard/keys", {"name": "panel", "kind": "standard", "expires": "never"})
    keys = client.get("/dashboard/keys").content.decode()
    for name in ("snippet-curl", "snippet-python"):
        shown = re.search(rf'<pre class="snippet" id="{name}">(.*?)</pre>', keys, re.S)
        assert shown and html.unescape(shown.group(1)) == text[name], name
    assert markup.index('id="quick-start"') < markup.index('id="guides-title"')  # the examples first
    overview = client.get("/dashboard/").content.decode()
    assert 'href="/dashboard/docs#quick-start">Call the API with it' in overview
    websocket = text["snippet-websocket"]
    compile(websocket, "snippet-websocket", "exec")
    assert 'websockets.connect("ws://testserver/v1/audio/stream"' in websocket
    assert "os.environ['TTS_API_KEY']" in websocket
    # Voice agents through ElevenLabs' wire, with this server's URL (docs/elevenlabs.md).
    for name in ("snippet-pipecat", "snippet-livekit"):
        compile(text[name], name, "exec")
    assert 'url="ws://testserver/elevenlabs"' in text["snippet-pipecat"]
    assert 'base_url="http://testserver/elevenlabs/v1"' in text["snippet-livekit"]

    # Each example has a Copy button naming it, and the page says where a key comes from.
    for name in SNIPPETS:
        button = page.one("button", **{"data-copy": name})
        assert button["text"] == "Copy" and button["attrs"]["aria-label"].startswith("Copy: ")
    assert "navigator.clipboard.writeText" in markup
    assert "API keys page" in [a["text"] for a in page.find("a", href="/dashboard/keys")]


def test_behind_tls_the_examples_say_https_and_wss(client):
    signup(client)
    _, page = docs_page(client, secure=True)
    assert page.one("code", id="snippet-curl")["text"].startswith('curl "https://testserver/v1/audio/speech"')
    assert 'websockets.connect("wss://testserver/v1/audio/stream"' in page.one("code", id="snippet-websocket")["text"]
    assert 'url="wss://testserver/elevenlabs"' in page.one("code", id="snippet-pipecat")["text"]


def test_the_docs_page_links_the_reference_the_schema_and_the_protocol(client):
    signup(client)
    _, page = docs_page(client)
    assert page.one("a", href="/v1/docs")["text"] == "API reference"
    assert page.one("a", href="/v1/openapi.json")["text"] == "OpenAPI schema"
    assert page.one("a", href="#websocket")["text"] == "WebSocket streaming protocol"
    assert page.one("a", href="/dashboard/docs")["attrs"]["aria-current"] == "page"  # the nav, for the way back


def test_relative_links_are_pointed_at_the_page_or_dropped_and_html_is_escaped():
    doc = render_markdown(
        "# Title\n\n## Close codes\n\nSee [the guide](operating.md), [codes](websocket.md#close-codes), "
        "[the protocol](../docs/websocket.md), [above](#close-codes), [PyPI](https://pypi.org/) and "
        "[bad](javascript:alert(1)).\n\n<script>alert(1)</script>\n",
        "ws-",
    )
    body = str(doc.body)
    assert "See the guide, " in body  # a repository file the reader does not have: text only
    assert '<a href="#ws-close-codes">codes</a>' in body
    assert '<a href="#websocket">the protocol</a>' in body
    assert '<a href="#ws-close-codes">above</a>' in body
    assert '<a href="https://pypi.org/">PyPI</a>' in body
    assert "javascript:" not in body.replace("[bad](javascript:alert(1))", "")
    assert "<script>" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert str(doc.title) == '<h2 id="ws-title"><a href="#ws-title" class="anchor">Title</a></h2>\n'


def test_the_protocol_is_rendered_once_per_process():
    assert websocket_protocol() is websocket_protocol()


URL_IN_CSS = re.compile(r"url\(\s*['\"]?([^'\")]+)")


def test_the_api_reference_serves_every_asset_itself_and_leads_back(client):
    response = client.get("/v1/docs")
    assert response.status_code == 200
    markup = response.content.decode()
    page = Elements(markup)
    urls = (
        [e["attrs"]["src"] for e in page.elements if e["tag"] in ("script", "img", "iframe") and "src" in e["attrs"]]
        + [e["attrs"]["href"] for e in page.find("link")]
        + [u for css in page.styles for u in URL_IN_CSS.findall(css)]
        + [u for e in page.elements for u in URL_IN_CSS.findall(e["attrs"].get("style") or "")]
    )
    assert any("redoc.standalone.js" in u for u in urls)
    for url in urls:
        parts = urlsplit(url)
        assert parts.scheme in ("", "data") and not parts.netloc, url  # this server's, or inline
        if parts.scheme == "":
            asset = client.get(url)
            assert asset.status_code == 200, url
            assert b"".join(asset.streaming_content if asset.streaming else [asset.content]), url
    assert "fonts.googleapis" not in markup and "cdn." not in markup
    schema = re.search(r'Redoc\.init\("([^"]+)"', markup)
    assert schema and client.get(schema.group(1)).status_code == 200
    back = page.one("a", id="back-to-dashboard")
    assert back["attrs"]["href"] == "/dashboard/docs" and back["text"] == "← Back to the dashboard"


def test_the_api_reference_titles_operations_in_words_grouped_with_speech_first(client):
    """Before: /v1/docs titled operations by machine id (`audio_models_retrieve`, `jobs_cancel_create`,
    `openapi.json_retrieve`), opened on an Open WebUI endpoint, and showed auth as "ApiKey or None"."""
    schema = client.get("/v1/openapi.json").json()
    operations = [op for ops in schema["paths"].values() for op in ops.values()]
    untitled = [op["operationId"] for op in operations if not op.get("summary") or "_" in op["summary"]]
    assert untitled == []
    tags = [tag["name"] for tag in schema["tags"]]
    assert tags[0] == "Speech" and tags[-1] == "Compatibility"
    assert {op["tags"][0] for op in operations} == set(tags)  # every tag named, every operation under one
    assert operations[0]["summary"] == "Create speech" and operations[0]["tags"] == ["Speech"]
    assert "/v1/openapi.json" not in schema["paths"]
    assert all({} not in op.get("security", []) for op in operations)
    compatibility = [op["summary"] for op in operations if op["tags"] == ["Compatibility"]]
    assert sorted(compatibility) == ["List models (Open WebUI)", "List voices (Open WebUI)"]


def test_the_websocket_section_speaks_to_a_tenant_of_this_server(client, settings):
    """Before: ws://127.0.0.1:8000 and `.venv/bin/python examples/ws_client.py` (a path in the
    repository) on a server elsewhere, and operators' settings (TTS_WS_BUFFER_BYTES) by name."""
    settings.ALLOWED_HOSTS = ["testserver", "tts.example.net"]
    settings.TTS_WS_BUFFER_BYTES = 8 * 2**20
    signup(client)
    section = client.get("/dashboard/docs", HTTP_HOST="tts.example.net").content.decode()
    protocol = section.split('id="websocket"', 1)[1]
    assert "127.0.0.1" not in protocol and "examples/" not in protocol and ".venv" not in protocol
    assert "TTS_" not in protocol.replace("$TTS_API_KEY", "").replace("TTS_API_KEY", "")
    assert "more than 8 MiB of frames" in protocol and "200 at once" in protocol
    assert "The Python example at the top of this page speaks through this socket" in protocol
    assert "ws://tts.example.net/v1/audio/stream" in protocol and "HOST/" not in protocol


def test_the_ssml_guide_is_on_the_page_with_what_each_element_does_per_model(client):
    signup(client)
    markup, page = docs_page(client)
    assert page.one("a", href="#ssml")["text"] == "SSML"
    guide = html.unescape(markup[markup.index('<section class="card" id="ssml">') :])
    assert "invalid_ssml" in guide and "speech.audio.segment" in guide and "<mark name=" in guide
    assert "read text, not phonemes" in guide and "docs/benchmarks.md" not in guide


# The guides of docs/ the dashboard serves, each at /dashboard/docs/<name>: its title (the file's first heading).
GUIDE_TITLES = {
    "api": "API (v1)",
    "keys-and-limits": "Keys, plans, quotas and usage",
    "voices": "Voices and pronunciation",
    "security": "Security",
    "billing": "Billing",
    "licences": "Licences and commercial use",
    "dashboard": "The dashboard",
}


def test_the_docs_page_links_every_guide_and_each_renders_on_its_own_page(client):
    """Before: the README held keys, limits, errors, voices, security, billing and licences, and the
    dashboard showed none of it. Each is a guide in docs/, linked from the Docs page and from the API
    reference's description, and rendered on a page of its own; a name outside the list is a 404."""
    signup(client)
    _, page = docs_page(client)
    for name, title in GUIDE_TITLES.items():
        assert page.one("a", href=f"/dashboard/docs/{name}")["text"] == title
        response = client.get(f"/dashboard/docs/{name}")
        assert response.status_code == 200, name
        guide = Elements(response.content.decode())
        assert [h1["text"] for h1 in guide.find("h1")] == [title], name
        assert guide.one("a", href="/dashboard/docs")["attrs"]["aria-current"] == "page"  # the nav, for the way back
        body = guide.one("section", id="guide")["text"]
        for raw in ("```", "](", "|---|"):
            assert raw not in body, (name, raw)
        # Links between the docs lead to the dashboard's pages, never to files of the repository.
        assert not [a for a in guide.find("a") if ".md" in a["attrs"].get("href", "")], name
    api = Elements(client.get("/dashboard/docs/api").content.decode())
    assert api.find("a", href="/dashboard/docs/keys-and-limits#keys-and-limits-making-a-key")
    assert api.one("h2", id="api-errors-and-error-codes")["text"] == "Errors and error codes"
    assert any(td["text"] == "insufficient_quota" for td in api.find("td"))
    for name in ("operating", "development", "benchmarks", "websocket", "README", "..%2Fsettings"):
        assert client.get(f"/dashboard/docs/{name}").status_code == 404, name
    description = client.get("/v1/openapi.json").json()["info"]["description"]
    for name, title in GUIDE_TITLES.items():
        assert f"[{title}](/dashboard/docs/{name})" in description, name
