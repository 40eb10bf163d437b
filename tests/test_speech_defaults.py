"""An organization's default model and voice: set over /v1/organization/speech_defaults (checked:
served, in the plan, a voice of that model; the organization scope) and on the Settings page; a
request that names no model, or OpenAI's names, then speaks with it (REST and the ledger, jobs,
the WebSocket protocol), with its voice when it names none; other models keep theirs."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import AuditEvent, Membership, Organization
from billing.models import UsageEvent
from synthesis.api import protocol
from synthesis.api.defaults import with_defaults
from synthesis.models import Job
from tests.factories import own_plan
from tests.test_dashboard_team import messages_of
from voices.models import Voice

pytestmark = pytest.mark.django_db(transaction=True)


def last_spoken(org) -> tuple[str, str]:
    event = UsageEvent.objects.filter(organization=org).order_by("-id").first()
    return event.model, event.voice


def test_defaults_are_set_checked_and_used_by_requests_that_leave_them_open(live_stack, owner, member, outsider):
    with live_stack.client(owner.key) as client:
        assert client.get("/organization/speech_defaults").json() == {"model": "", "voice": ""}
        for body, status, param in (
            ({"model": "nope", "voice": ""}, 404, "model"),
            ({"model": "chattts", "voice": "af_heart"}, 400, "voice"),  # a Kokoro voice
            ({"model": "kokoro", "voice": "voice_0123456789abcdef"}, 400, "voice"),
            ({"model": "kokoro"}, 400, "voice"),
            ({"model": "", "voice": "af_heart"}, 400, "voice"),  # a voice goes with the default model (ChatTTS)
        ):
            refused = client.put("/organization/speech_defaults", json=body)
            assert refused.status_code == status and refused.json()["error"]["param"] == param, refused.text
        with live_stack.client(member.key) as standard:
            assert (
                standard.put("/organization/speech_defaults", json={"model": "kokoro", "voice": ""}).status_code == 403
            )
        saved = client.put("/organization/speech_defaults", json={"model": "kokoro-v1.0", "voice": "af_bella"})
        assert saved.status_code == 200 and saved.json() == {"model": "kokoro", "voice": "af_bella"}
        assert AuditEvent.objects.filter(organization=owner.org, action="settings.speech_defaults").exists()

        for body, spoken in (
            ({}, ("kokoro", "af_bella")),  # no model, no voice: both defaults
            ({"model": "tts-1"}, ("kokoro", "af_bella")),  # OpenAI's names mean the organization's default
            ({"voice": "nova"}, ("kokoro", "nova")),  # a voice named: kept
            ({"model": "chattts"}, ("chattts", "alloy")),  # another model: its own default voice
        ):
            answer = client.post("/audio/speech", json={"input": "Defaults.", "response_format": "pcm", **body})
            assert answer.status_code == 200, answer.text
            assert last_spoken(owner.org) == spoken, body
        job = client.post("/jobs", json={"input": "A default job."})
        assert job.status_code == 202 and Job.objects.get(pk=job.json()["id"]).model == "kokoro"
    with live_stack.client(outsider.key) as other:  # another organization keeps the deployment's default
        assert other.post("/audio/speech", json={"input": "Mine.", "response_format": "pcm"}).status_code == 200
        assert last_spoken(outsider.org)[0] == "chattts"


def test_a_model_outside_the_plan_is_refused_as_a_default(live_stack, owner):
    own_plan(owner.org, "chattts-only", allowed_models=["chattts"])
    with live_stack.client(owner.key) as client:
        refused = client.put("/organization/speech_defaults", json={"model": "kokoro", "voice": ""})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_in_plan"


def test_the_websocket_protocol_fills_the_defaults(settings):
    settings.TTS_ENGINES = ["chattts", "kokoro"]
    org = Organization(name="Unsaved", default_model="kokoro", default_voice="af_bella")
    message = protocol.parse(json.dumps({"type": "synthesize", "text": "Hi."}), organization=org)
    assert (message.speech["model"], message.speech["voice"]) == ("kokoro", "af_bella")
    plain = protocol.parse(json.dumps({"type": "synthesize", "text": "Hi."}))
    assert plain.speech["model"] == "chattts" and plain.speech["voice"] == "alloy"
    gone = Organization(name="Old", default_model="retired-model", default_voice="x")
    filled = with_defaults({"input": "x"}, gone)
    assert filled["model"] == "chattts" and "voice" not in filled  # no longer served: the deployment's, its voice


def test_the_settings_page_sets_the_defaults_and_says_what_is_wrong(owner):
    user = get_user_model().objects.create_user("admin@example.com", "admin@example.com", "correct horse battery")
    Membership.objects.create(user=user, organization=owner.org, role="admin")
    page = Client()
    page.force_login(user)
    form = page.get("/dashboard/organization").content.decode()
    assert 'name="model"' in form and "af_bella" in form and "The service&#x27;s default" in form
    wrong = page.post("/dashboard/organization", {"action": "defaults", "model": "chattts", "voice": "af_bella"})
    said = html.unescape(wrong.content.decode())  # in words, not the API's error naming a URL
    assert wrong.status_code == 200 and "af_bella is a Kokoro-82M voice; ChatTTS cannot speak with it." in said
    assert (
        "Choose one of ChatTTS's voices, or none for its default." in said
        and "/v1/" not in said.split("id_voice_error")[1][:300]
    )
    unnamed = page.post("/dashboard/organization", {"action": "defaults", "model": "", "voice": "af_bella"})
    assert "af_bella is a Kokoro-82M voice; ChatTTS cannot speak with it." in html.unescape(unnamed.content.decode())
    saved = page.post(
        "/dashboard/organization", {"action": "defaults", "model": "kokoro", "voice": "af_bella"}, follow=True
    )
    assert "Default model and voice saved" in messages_of(saved)
    owner.org.refresh_from_db()
    assert (owner.org.default_model, owner.org.default_voice) == ("kokoro", "af_bella")
    playground = page.get("/dashboard/playground").content.decode()
    assert re.search(r'<option value="kokoro"[^>]* selected>', playground)  # the playground starts on it
    assert re.search(r'<option value="af_bella"[^>]* selected', playground)


def test_an_own_voice_as_the_default_is_cleared_when_the_voice_is_deleted(owner):
    user = get_user_model().objects.create_user("owner2@example.com", "owner2@example.com", "correct horse battery")
    Membership.objects.create(user=user, organization=owner.org, role="owner")
    mine = Voice.objects.create(organization=owner.org, name="Mine", model="chattts", source="seed", seed=3)
    page = Client()
    page.force_login(user)
    page.post("/dashboard/organization", {"action": "defaults", "model": "chattts", "voice": mine.id})
    owner.org.refresh_from_db()
    assert owner.org.default_voice == mine.id
    page.post(f"/dashboard/voices/{mine.id}/delete")
    owner.org.refresh_from_db()
    assert (owner.org.default_model, owner.org.default_voice) == ("chattts", "")  # not left naming a deleted voice
