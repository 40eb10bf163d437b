"""The dashboard with two models (Django's test client): the playground's model picker (the plan's
models with their licences, each one's voices and options), the voices page per model (previews on
the model, Kokoro mixes made from rows of a voice and a weight, errors on the row they are about),
lexicon lines with phonemes, the models' licences on the Docs page and the source-code link in every
page's footer. A model the plan does not include is neither offered nor accepted."""

from __future__ import annotations

import html
import re

import pytest

from accounts.models import Organization
from tests.factories import own_plan
from voices.actions import create_voice
from voices.lexicons import save_lexicon
from voices.models import Lexicon, Voice

pytestmark = pytest.mark.django_db

KOKORO_LABEL = "Kokoro-82M — Apache-2.0, may be sold"
CHATTTS_LABEL = "ChatTTS — non-commercial weights (CC BY-NC 4.0)"


def signup(client, org="Analytical Engines") -> Organization:
    client.post(
        "/dashboard/signup", {"email": "ada@example.com", "password": "correct horse battery", "organization": org}
    )
    return Organization.objects.get(name=org)


def text(response) -> str:
    """The page as a user reads it: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def select(page: str, element_id: str) -> str:
    """The options of the <select> with that id, as HTML."""
    found = re.search(rf'<select id="{element_id}"[^>]*>(.*?)</select>', page, re.S)
    assert found, f"no select #{element_id}"
    return found.group(1)


def template(page: str, element_id: str) -> str:
    found = re.search(rf'<template id="{element_id}">(.*?)</template>', page, re.S)
    assert found, f"no template #{element_id}"
    return found.group(1)


def values(options_html: str) -> list[str]:
    return re.findall(r'<option value="([^"]*)"', options_html)


def mix_post(client, model="kokoro", name="Blend", **rows):
    """The voice form as a browser without JavaScript sends it: every row, blank ones included."""
    data = {"name": name, "description": "", "model": model, "source": "seed", "seed": "", "speaker": ""}
    for row in range(8):
        data[f"mix_voice_{row}"] = rows.get(f"voice{row}", "")
        data[f"mix_weight_{row}"] = rows.get(f"weight{row}", "")
    return client.post("/dashboard/voices", data)


def test_the_playground_offers_the_plans_models_with_their_licences_and_each_ones_voices(client):
    org = signup(client)
    mix = create_voice(org, {"name": "Blend", "model": "kokoro", "mix": [{"voice": "af_heart", "weight": 1}]})
    seeded = create_voice(org, {"name": "Narrator", "model": "chattts", "seed": 42})
    page = html.unescape(client.get("/dashboard/playground").content.decode())

    models = select(page, "pg-model")
    assert values(models) == ["chattts", "kokoro"]
    assert f">{CHATTTS_LABEL}</option>" in models and f">{KOKORO_LABEL}</option>" in models
    assert re.search(r'<option value="chattts"[^>]* selected>', models)  # the deployment's default model
    assert 'data-weight="0.5"' in models and "each character billed as 0.5" in models  # the plan's weight

    shown = values(select(page, "pg-voice"))  # the default model's voices, then the organization's for it
    assert shown[:13] == values(template(page, "pg-voices-chattts"))[:13] and "alloy" in shown
    assert seeded.id in shown and mix.id not in shown and "af_heart" not in shown
    kokoro = template(page, "pg-voices-kokoro")
    assert {"alloy", "af_heart", "bm_george", "zf_xiaobei", mix.id} <= set(values(kokoro))
    assert seeded.id not in values(kokoro)
    # OpenAI's name says which voice it is, and the card what it sounds like (before: bare ids).
    assert '<option value="alloy">alloy (af_alloy) · American English, female</option>' in kokoro
    assert f'<optgroup label="Your voices"><option value="{mix.id}">Blend</option></optgroup>' in kokoro

    # Options only where a model takes them (from its spec): the seed and the sampling options are ChatTTS's.
    assert re.search(r'<p data-models="chattts"><label for="pg-seed">Seed</label>', page)
    for option in ("temperature", "top_p", "top_k", "refine_text", "refine_prompt"):
        assert re.search(rf'<div class="field" data-models="chattts">.{{0,200}}data-option="{option}"', page, re.S)
    assert 'data-models="kokoro"' not in page and 'data-models="chattts kokoro"' not in page
    assert 'min="0.01" max="2.0" step="any" placeholder="0.3"' in page  # temperature's range and default
    assert "model=${JSON.stringify(model)}" in page and "model: model.value" in page  # code and message carry it


def test_unless_the_operator_names_one_the_playground_and_snippets_use_a_model_whose_audio_may_be_sold(
    client, settings
):
    settings.TTS_DEFAULT_MODEL = ""  # as deployed without it, ChatTTS listed first (TTS_ENGINES=chattts,kokoro)
    signup(client)
    models = select(html.unescape(client.get("/dashboard/playground").content.decode()), "pg-model")
    assert values(models) == ["chattts", "kokoro"]  # both offered, the non-commercial one when picked
    assert re.search(r'<option value="kokoro"[^>]* selected>', models), models
    docs = text(client.get("/dashboard/docs"))
    assert "mean kokoro" in docs  # OpenAI's names, as the Docs page explains them
    # The snippets (the same set on Keys once a key exists) name the model they speak with: Kokoro.
    assert '"model": "kokoro", "input": "Hello!"' in docs and '"model": "chattts", "input"' not in docs


def test_the_playground_preselects_a_model_and_voice_and_an_own_voice_names_its_model(client):
    org = signup(client)
    mix = create_voice(org, {"name": "Blend", "model": "kokoro", "mix": [{"voice": "af_heart", "weight": 1}]})

    def chosen(query: str) -> tuple[str, str]:
        page = client.get(f"/dashboard/playground?{query}").content.decode()
        model = re.search(r'<option value="(\w+)"[^>]* selected>', select(page, "pg-model")).group(1)
        voice = re.search(r'<option value="(\w+)" selected>', select(page, "pg-voice"))
        return model, voice.group(1) if voice else ""

    assert chosen("model=kokoro&voice=af_heart") == ("kokoro", "af_heart")  # "Use in playground"
    assert chosen(f"voice={mix.id}") == ("kokoro", mix.id)
    assert chosen("voice=bm_george") == ("kokoro", "bm_george")  # only Kokoro has it
    assert chosen("voice=nova") == ("chattts", "nova")  # both have it: the default model
    assert chosen("model=nope&voice=alloy") == ("chattts", "alloy")


def test_a_model_the_plan_does_not_include_is_not_offered_and_is_refused(client):
    org = signup(client)
    own_plan(org, "chattts-only", allowed_models=["chattts"])
    playground = client.get("/dashboard/playground?model=kokoro&voice=af_heart").content.decode()
    assert values(select(playground, "pg-model")) == ["chattts"] and 'id="pg-voices-kokoro"' not in playground
    assert "Kokoro" not in html.unescape(select(playground, "pg-model"))

    voices = client.get("/dashboard/voices")
    page = voices.content.decode()
    assert 'value="kokoro"' not in re.search(r'<fieldset class="field model-choice".*?</fieldset>', page, re.S).group(0)
    kokoro = re.search(r'<section class="card" id="builtin-kokoro".*?</section>', page, re.S).group(0)
    assert "Not in your plan." in kokoro and 'class="preview"' not in kokoro and "Use in playground" not in kokoro
    assert "not on your plan" in kokoro
    chattts = re.search(r'<section class="card" id="builtin-chattts".*?</section>', page, re.S).group(0)
    assert 'data-url="/dashboard/voices/alloy/preview?model=chattts"' in chattts

    refused = mix_post(client, voice0="af_heart", weight0="1")
    assert refused.status_code == 200
    assert "kokoro is not a model your plan includes here: pick one of those listed." in text(refused)
    assert not Voice.objects.exists()

    preview = client.get("/dashboard/voices/af_heart/preview?model=kokoro")  # the model reaches the API
    assert preview.status_code == 403 and preview.json()["error"]["code"] == "model_not_in_plan"
    docs = text(client.get("/dashboard/docs"))
    assert re.search(r"Kokoro-82M v1\.0 .*? On your plan no", docs)


def test_previews_name_their_model_and_another_organizations_voice_is_404(client):
    org = signup(client)
    other = Organization.objects.create(name="Globex", slug="globex")
    theirs = create_voice(other, {"name": "Theirs", "model": "kokoro", "mix": [{"voice": "af_heart", "weight": 1}]})
    assert client.get(f"/dashboard/voices/{theirs.id}/preview").status_code == 404
    assert client.get(f"/dashboard/voices/{theirs.id}/preview?model=kokoro").status_code == 404
    assert client.post(f"/dashboard/voices/{theirs.id}/delete").status_code == 404
    assert theirs.id not in client.get("/dashboard/playground?model=kokoro").content.decode()
    missing = client.get("/dashboard/voices/af_heart/preview")  # the default model (ChatTTS) has no af_heart
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    unknown = client.get("/dashboard/voices/alloy/preview?model=nope")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert Voice.objects.filter(organization=org).count() == 0 and Voice.objects.filter(pk=theirs.pk).exists()


def test_the_voices_page_lists_each_models_built_in_voices_with_its_licence(client):
    signup(client)
    page = client.get("/dashboard/voices").content.decode()
    for name, title, licence in (("chattts", "ChatTTS", CHATTTS_LABEL), ("kokoro", "Kokoro-82M", KOKORO_LABEL)):
        section = html.unescape(re.search(rf'<section class="card" id="builtin-{name}".*?</section>', page, re.S)[0])
        assert f">{title} <" in section and licence.split(" — ")[1] in section
        assert f'href="/dashboard/playground?model={name}&voice=alloy"' in section
    kokoro = re.search(r'<section class="card" id="builtin-kokoro".*?</section>', page, re.S).group(0)
    assert kokoro.count("<tr data-voice=") == 13 + 54  # OpenAI's names, then its own voices
    assert 'data-url="/dashboard/voices/af_heart/preview?model=kokoro"' in kokoro
    assert "may not be sold" in html.unescape(page)  # said of ChatTTS's weights


def test_a_kokoro_voice_is_a_mix_of_built_in_voices_from_rows_of_the_form(client):
    signup(client)
    created = mix_post(client, voice0="af_heart", weight0="3", voice2="bm_george", weight2="1")  # a row left blank
    assert created.status_code == 302 and created["Location"] == "/dashboard/voices"
    voice = Voice.objects.get()
    assert (voice.model, voice.source, voice.seed, voice.speaker) == ("kokoro", "mix", None, "")
    assert voice.mix == [["af_heart", 0.75], ["bm_george", 0.25]]
    assert sum(weight for _, weight in voice.mix) == pytest.approx(1)

    page = client.get("/dashboard/voices")
    shown = text(page)
    assert f"Blend {voice.id} Kokoro-82M mix: af_heart 75%, bm_george 25% Preview not billed Use in playground" in shown
    assert f'href="/dashboard/playground?model=kokoro&amp;voice={voice.id}"' in page.content.decode()

    assert mix_post(client, name="Even", voice0="af_heart", voice1="am_adam", weight1="1").status_code == 302
    assert Voice.objects.get(name="Even").mix == [["af_heart", 0.5], ["am_adam", 0.5]]  # a blank weight is 1


def test_the_mix_forms_errors_are_on_the_row_they_are_about(client):
    signup(client)

    def refused(**fields) -> tuple[str, str]:
        response = mix_post(client, **fields)
        assert response.status_code == 200
        return response.content.decode(), text(response)

    page, shown = refused(voice0="af_heart", weight0="1", voice3="af_heart", weight3="2")
    assert '<div class="error" id="id_mix_voice_3_error">' in page and "'af_heart' is in the mix twice." in shown
    assert 'aria-invalid="true" aria-describedby="id_mix_voice_3_error"' in page
    page, shown = refused(voice0="af_heart", weight0="1", weight1="2")  # a weight without a voice
    assert (
        '<div class="error" id="id_mix_voice_1_error">Pick a voice for this weight, or clear the weight.</div>' in page
    )
    page, shown = refused(voice0="af_heart", weight0="0")
    assert '<div class="error" id="id_mix_weight_0_error">Ensure this value is greater than or equal to 0.01.' in page
    page, shown = refused()  # Kokoro and no row
    assert '<div class="error" id="id_mix_voice_0_error">Give 1 to 8 voices.</div>' in page
    page, shown = refused(voice0="bm_lewis", weight0="abc")
    assert '<div class="error" id="id_mix_weight_0_error">Enter a number.</div>' in page
    page, shown = refused(voice0="zz_nobody", weight0="1")
    assert "Select a valid choice. zz_nobody is not one of the available choices." in shown
    page, shown = refused(model="chattts", voice0="af_heart", weight0="1")  # no JavaScript: every row is sent
    assert "Model 'chattts' (ChatTTS) cannot make a voice as a mix of voices." in shown
    assert 'id="id_mix_voice_0_error"' in page
    assert 'value="Blend"' in page  # what was typed stays
    assert not Voice.objects.exists()


def test_lexicon_lines_carry_phonemes_both_ways(client):
    signup(client)
    page = text(client.get("/dashboard/lexicons"))
    assert "Models that read phonemes (Kokoro-82M) use them, in misaki's notation; the others (ChatTTS)" in page
    lines = "Kokoro = /kˈOkəɹO/\nSQL = sequel /sˈikwəl/ (case)\nkm/h = kilometres per hour\nnginx = / ˈɛnʤɪnˈɛks /"
    assert client.post("/dashboard/lexicons", {"name": "Words", "entries": lines}).status_code == 302
    lexicon = Lexicon.objects.get()
    assert lexicon.entries == [
        {"text": "Kokoro", "alias": "", "phonemes": "kˈOkəɹO", "case_sensitive": False},
        {"text": "SQL", "alias": "sequel", "phonemes": "sˈikwəl", "case_sensitive": True},
        {"text": "km/h", "alias": "kilometres per hour", "phonemes": "", "case_sensitive": False},
        {"text": "nginx", "alias": "", "phonemes": "ˈɛnʤɪnˈɛks", "case_sensitive": False},
    ]
    edit = html.unescape(client.get(f"/dashboard/lexicons/{lexicon.id}").content.decode())
    shown = "Kokoro = /kˈOkəɹO/\nSQL = sequel /sˈikwəl/ (case)\nkm/h = kilometres per hour\nnginx = /ˈɛnʤɪnˈɛks/"
    assert f"{shown}</textarea>" in edit
    again = client.post(f"/dashboard/lexicons/{lexicon.id}", {"name": "Words", "entries": shown})
    assert again.status_code == 302
    lexicon.refresh_from_db()
    assert [e["phonemes"] for e in lexicon.entries] == ["kˈOkəɹO", "sˈikwəl", "", "ˈɛnʤɪnˈɛks"]  # unchanged

    made = save_lexicon(Lexicon(organization=lexicon.organization), {"name": "API", "entries": [
        {"text": "GIF", "phonemes": "ɡˈɪf"}, {"text": "GNU", "alias": "g new", "phonemes": "ɡnˈu"}
    ]})  # fmt: skip
    assert "GIF = /ɡˈɪf/\nGNU = g new /ɡnˈu/</textarea>" in html.unescape(
        client.get(f"/dashboard/lexicons/{made.id}").content.decode()
    )
    refused = client.post("/dashboard/lexicons", {"name": "Bad", "entries": "ok = fine\nC(x) = /si/"})
    assert refused.status_code == 200 and "Line 2: an entry with phonemes has none of" in text(refused)


def test_the_docs_page_says_each_models_licences_languages_and_features(client):
    signup(client)
    page = text(client.get("/dashboard/docs"))
    kokoro = page[page.index("Kokoro-82M v1.0") :]
    assert kokoro.startswith('Kokoro-82M v1.0 · model: "kokoro"')
    assert "May its audio be sold? Yes: Apache-2.0, may be sold." in kokoro
    assert "Code Apache-2.0 — Permissive" in kokoro
    assert "Languages English, Chinese, Spanish, French, Hindi, Italian, Japanese, Portuguese" in kokoro
    # Before: "54 built-in voices" where the Voices page lists 67 names (OpenAI's 13 map onto some of the 54).
    said = "· 54 built-in voices, and OpenAI's 13 names, which speak with some of them (67 names to choose from)"
    assert said in kokoro
    assert "word timings in its captions" in kokoro and "your own voices from a mix of its built-in voices" in kokoro
    assert "Options of its own none On your plan yes" in kokoro
    chattts = page[page.index("ChatTTS v0.2") : page.index("Kokoro-82M v1.0")]
    assert "May its audio be sold? No : non-commercial weights (CC BY-NC 4.0)." in chattts
    assert "Code AGPL-3.0-or-later — Free software" in chattts and "Weights CC BY-NC 4.0 — Non-commercial" in chattts
    assert "word timings" not in chattts and "temperature" in chattts
    assert "your own voices from a seed or a speaker embedding or a recording" in chattts


def test_every_page_links_the_source_code_or_says_it_has_no_link(client, settings):
    settings.TTS_SOURCE_URL = "https://git.example.org/tts"
    login = client.get("/accounts/login/").content.decode()
    assert '<a href="https://git.example.org/tts" id="source-code">Source code (AGPL-3.0)</a>' in login
    signup(client)
    for path in ("/dashboard/", "/dashboard/voices", "/dashboard/nope"):
        assert b'id="source-code">Source code (AGPL-3.0)</a>' in client.get(path).content, path
    assert "its source code is at https://git.example.org/tts" in text(client.get("/dashboard/docs"))
    settings.TTS_SOURCE_URL = ""
    page = client.get("/dashboard/")
    assert b"Source code (AGPL-3.0)" not in page.content
    assert "is free software under the AGPL-3.0 ; its operator has not published a link to its source code" in text(
        page
    )
