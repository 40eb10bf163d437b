"""The operator's admin console (/admin/) refuses what would break a tenant: what staff type is
checked as the API checks it (the organization's allowlist, default model and voice, event
endpoint, retention; a key's scopes, allowlist and limits; a plan's lists and numbers, an
organization's overrides), and a bad value stored anyway (a raw UPDATE, an old row) refuses the
tenant's requests with an error saying so, logged for the operator, never a 500. Secrets are not
shown, Stripe's fields and a quota's count are not typed by hand (a correction is an audited action
with a reason), staff sign in with their e-mail address and land on their own links."""

from __future__ import annotations

import html
import io
import json
import re
from datetime import date
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from accounts.models import ApiKey, AuditEvent, Membership, Organization
from billing.limits import subscription_for
from billing.models import Plan, QuotaPeriod, UsageEvent
from inference.registry import SPECS
from synthesis.api import protocol
from synthesis.service.prepared import zero_retention
from synthesis.webhook_models import WebhookDelivery, WebhookEndpoint
from tests.factories import make_job

pytestmark = pytest.mark.django_db(transaction=True)


class _Form(HTMLParser):
    """What a browser posts for the page's main form: its fields' values as the page shows them."""

    def __init__(self, form_id: str):
        super().__init__()
        self.form_id, self.inside, self.fields = form_id, False, []
        self._select: str | None = None
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = True
        if not self.inside:
            return
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") not in ("checkbox", "radio") or "checked" in a:
                self.fields.append((name, a.get("value", "on" if a.get("type") == "checkbox" else "")))
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.fields.append((self._select, a.get("value", "")))
        elif tag == "textarea" and name:
            self._textarea, self._text = name, ""

    def handle_data(self, data):
        if self._textarea:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea" and self._textarea:
            self.fields.append((self._textarea, html.unescape(self._text).lstrip("\n")))
            self._textarea = None


def change_form(client: Client, url: str, form_id: str) -> dict:
    parser = _Form(form_id)
    parser.feed(client.get(url).content.decode())
    data: dict = {}
    for name, value in parser.fields:
        data.setdefault(name, []).append(value)
    return data


def errors_of(response) -> list[str]:
    """The admin form's error messages, as staff read them."""
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", f)).split()) for f in found]


def console_messages(response) -> str:
    """The messages the admin console shows after an action."""
    found = re.search(r'<ul class="messagelist">(.*?)</ul>', response.content.decode(), re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split()) if found else ""


def post_change(client: Client, url: str, form_id: str, **changes):
    data = change_form(client, url, form_id)
    for name, value in changes.items():
        data[name] = [value]
    return client.post(url, data)


def org_url(org) -> str:
    return f"/admin/accounts/organization/{org.pk}/change/"


def new_org(name: str = "Initech") -> Organization:
    org = Organization.objects.create(name=name, slug=name.lower())
    subscription_for(org)
    return org


def test_the_console_refuses_an_organizations_settings_the_api_would_refuse(admin_client, settings):
    settings.TTS_ENGINES = ["chattts", "kokoro"]
    org = new_org()
    url = org_url(org)
    refused = post_change(
        admin_client,
        url,
        "organization_form",
        allowed_ips='["banana"]',
        default_model="gpt-9",
        data_retention="forever",
    )
    assert refused.status_code == 200  # the form again, not "changed successfully"
    errors = " | ".join(errors_of(refused))
    assert "'banana' is not an IP address or CIDR network" in errors, errors
    # The default model is picked from those served (it was typed: "gpt-9" was refused only on save).
    assert "Select a valid choice. gpt-9 is not one of the available choices." in errors
    assert "Select a valid choice. forever is not one of the available choices." in errors
    org.refresh_from_db()
    assert (org.allowed_ips, org.default_model, org.data_retention) == ([], "", "standard")

    wrong_voice = post_change(admin_client, url, "organization_form", default_model="chattts", default_voice="af_heart")
    assert wrong_voice.status_code == 200 and any("af_heart" in e for e in errors_of(wrong_voice))
    no_voice = post_change(admin_client, url, "organization_form", default_voice="no_such_voice")
    assert no_voice.status_code == 200 and any("no_such_voice" in e for e in errors_of(no_voice))
    assert Organization.objects.get(pk=org.pk).default_voice == ""

    bad_origin = post_change(admin_client, url, "organization_form", browser_origins="app.example.com/path")
    assert bad_origin.status_code == 200  # refused as the API and Settings refuse it, saying why
    assert any("is not an origin" in e for e in errors_of(bad_origin)), errors_of(bad_origin)
    assert Organization.objects.get(pk=org.pk).browser_origins == []

    saved = post_change(
        admin_client,
        url,
        "organization_form",
        browser_origins="HTTPS://App.Example.com/",  # stored as a browser sends it
        allowed_ips="203.0.113.7\n10.0.0.0/8",  # one a line (it showed the stored JSON: `[]`)
        default_model="kokoro",
        default_voice="af_bella",
    )
    assert saved.status_code == 302, errors_of(saved)
    org.refresh_from_db()  # stored as the API stores them
    assert org.allowed_ips == ["203.0.113.7/32", "10.0.0.0/8"]
    assert org.browser_origins == ["https://app.example.com"]
    assert (org.default_model, org.default_voice) == ("kokoro", "af_bella")
    shown = admin_client.get(url).content.decode()
    assert ">\n203.0.113.7/32\n10.0.0.0/8</textarea>" in shown and '">\nhttps://app.example.com</textarea>' in shown
    assert '<option value="kokoro" selected>' in shown and 'name="created_at"' not in shown  # created_at: read-only
    assert admin_client.get("/admin/accounts/organization/add/").status_code == 200  # (its model is read-only there)
    assert AuditEvent.objects.filter(organization=org, action="staff.changed", actor_type="staff").exists()


def test_the_console_refuses_a_keys_scopes_allowlist_and_limits_the_api_would_refuse(admin_client):
    org = new_org()
    key, raw = org.create_api_key("backend")
    url = f"/admin/accounts/apikey/{key.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert key.hashed_key not in page and raw not in page and 'name="hashed_key"' not in page
    assert admin_client.get("/admin/accounts/apikey/add/").status_code == 403  # keys are made by their tenant
    refused = post_change(
        admin_client, url, "apikey_form", scopes='["banana"]', allowed_ips='["banana"]', monthly_character_cap="0"
    )
    assert refused.status_code == 200
    errors = " | ".join(errors_of(refused))
    assert "Unknown scope 'banana'" in errors and "'banana' is not an IP address" in errors, errors
    assert "At least 1 and at most 1,000,000,000,000." in errors
    key.refresh_from_db()
    assert key.kind == "standard" and "banana" not in key.scopes

    saved = post_change(admin_client, url, "apikey_form", scopes='["speech:write", "usage:read"]', allowed_ips="[]")
    assert saved.status_code == 302, errors_of(saved)
    key.refresh_from_db()
    assert key.scopes == ["speech:write", "usage:read"] and key.kind == "restricted"
    assert key.hashed_key and key.matches(raw)  # the secret still opens it


def test_the_console_refuses_a_plans_lists_and_numbers_and_bad_overrides(admin_client):
    org = new_org()
    plan = Plan.objects.get(slug="free")
    weights = plan.model_weights
    url = f"/admin/billing/plan/{plan.pk}/change/"
    refused = post_change(
        admin_client,
        url,
        "plan_form",
        allowed_formats='["mp4"]',
        allowed_models='["gpt-9"]',
        allowed_voices='"alloy"',
        model_weights='{"kokoro": "half"}',
        queue_priority="12",
        requests_per_minute="0",
    )
    assert refused.status_code == 200
    errors = " | ".join(errors_of(refused))
    for expected in (
        "Not codecs: mp4",
        f"Not model ids (one of {', '.join(sorted(SPECS))}): gpt-9.",
        "A JSON list of names",
        "The weight of 'kokoro' must be a number above 0.",
        "At least 0 and at most 9.",
        "At least 1.",
    ):
        assert expected in errors, (expected, errors)
    plan.refresh_from_db()
    assert plan.allowed_formats == [] and plan.model_weights == weights and plan.queue_priority != 12

    sub = subscription_for(org)
    overrides = post_change(
        admin_client, f"/admin/billing/subscription/{sub.pk}/change/", "subscription_form", monthly_characters="-5"
    )
    assert overrides.status_code == 200 and "At least 0." in " ".join(errors_of(overrides))
    assert subscription_for(org).monthly_characters is None


def test_stripes_fields_and_a_quotas_count_cannot_be_typed(admin_client):
    org = new_org()
    sub = subscription_for(org)
    sub.stripe_customer_id, sub.billing_status = "cus_real", "active"
    sub.save()
    QuotaPeriod.objects.create(organization=org, period_start=date(2026, 1, 1), used=200)
    url = f"/admin/billing/subscription/{sub.pk}/change/"
    page = admin_client.get(url).content.decode()
    for field in ("stripe_customer_id", "stripe_subscription_id", "billing_status", "past_due_since"):
        assert f'name="{field}"' not in page, field
    assert "cus_real" in page  # shown, not editable
    posted = change_form(admin_client, url, "subscription_form")
    admin_client.post(url, {**posted, "stripe_customer_id": "cus_typed", "billing_status": "canceled"})
    sub.refresh_from_db()
    assert (sub.stripe_customer_id, sub.billing_status) == ("cus_real", "active")
    org_page = admin_client.get(org_url(org)).content.decode()
    assert 'name="subscription-0-stripe_customer_id"' not in org_page
    assert 'name="quota_periods-0-used"' not in org_page
    link = html.unescape(re.search(r'<a href="([^"]+)">correct…</a>', org_page).group(1))
    listed = admin_client.get(link)
    assert listed.status_code == 200 and "Initech" in listed.content.decode() and "?e=1" not in link


def test_a_quota_is_corrected_by_an_action_with_a_reason_in_the_tenants_audit_log(admin_client):
    org = new_org()
    period = QuotaPeriod.objects.create(organization=org, period_start=date(2026, 1, 1), used=200)
    changelist = "/admin/billing/quotaperiod/"
    assert 'name="used"' not in admin_client.get(f"{changelist}{period.pk}/change/").content.decode()
    chosen = {"action": "correct_used", "_selected_action": [period.pk]}
    form = admin_client.post(changelist, chosen)
    assert form.status_code == 200 and b'name="reason"' in form.content
    no_reason = admin_client.post(changelist, {**chosen, "adjustment": "-50", "reason": " ", "apply": "Correct"})
    assert "This field is required." in errors_of(no_reason)
    both = admin_client.post(changelist, {**chosen, "used": "1", "adjustment": "-50", "reason": "x", "apply": "1"})
    assert "Give either the new value or an adjustment." in " ".join(errors_of(both))
    below = admin_client.post(changelist, {**chosen, "adjustment": "-500", "reason": "x", "apply": "1"}, follow=True)
    assert "cannot go below 0 (they are 200)" in console_messages(below)
    assert QuotaPeriod.objects.get(pk=period.pk).used == 200

    done = admin_client.post(
        changelist,
        {**chosen, "adjustment": "-50", "reason": "Outage on 3 January: refunded", "apply": "Correct"},
        follow=True,
    )
    assert "200 characters used, now 150." in console_messages(done)
    assert QuotaPeriod.objects.get(pk=period.pk).used == 150
    event = AuditEvent.objects.get(organization=org, target="quota:2026-01")
    assert (event.action, event.actor_type, event.actor_label) == ("staff.changed", "staff", "admin@example.com")
    assert event.before == {"used": 200} and event.after == {"used": 150, "reason": "Outage on 3 January: refunded"}


def test_the_webhook_secret_is_never_shown_and_is_rotated_by_an_audited_action(admin_client):
    org = new_org()
    old = org.webhook_secret
    pages = [admin_client.get(org_url(org)), admin_client.get("/admin/accounts/organization/")]
    assert all(p.status_code == 200 for p in pages)
    assert all(old not in p.content.decode() and old.removeprefix("whsec_") not in p.content.decode() for p in pages)
    assert "set, not shown" in pages[0].content.decode()
    rotated = admin_client.post(
        "/admin/accounts/organization/",
        {"action": "rotate_webhook_secret", "_selected_action": [org.pk]},
        follow=True,
    )
    assert "Webhook signing secret rotated for 1 organization(s)." in console_messages(rotated)
    org.refresh_from_db()
    assert org.webhook_secret != old and org.previous_webhook_secret == old
    page = admin_client.get(org_url(org)).content.decode()
    assert org.webhook_secret not in page and old not in page and "the previous one signs too until" in page
    (rotation,) = AuditEvent.objects.filter(organization=org, action="webhook_secret.rotated")
    assert rotation.actor_type == "staff"  # the operator's action, not a member's
    invitation = org.invitations.create(email="new@example.com")
    assert (
        invitation.token not in admin_client.get(f"/admin/accounts/invitation/{invitation.pk}/change/").content.decode()
    )


def test_operators_see_webhook_endpoints_and_deliveries_without_secrets_and_change_neither(admin_client):
    org = new_org()
    endpoint = WebhookEndpoint.objects.create(
        organization=org, url="https://hook-user:s3cret-pw@hooks.example.com/tts", events=["job.failed"]
    )
    delivery = WebhookDelivery.objects.create(
        organization=org,
        endpoint=endpoint,
        event=WebhookDelivery.Event.JOB_EVENT,
        event_type="job.failed",
        message_id="msg_1",
        url="https://hooks.example.com/tts",  # as the log stores it
        status=500,
        attempts=[{"status": 500}, {"status": 500}],
        response_body="receiver down",
    )
    pages = {
        url: admin_client.get(url)
        for url in (
            "/admin/synthesis/webhookendpoint/",
            f"/admin/synthesis/webhookendpoint/{endpoint.pk}/change/",
            f"/admin/synthesis/webhookendpoint/{endpoint.pk}/history/",
            "/admin/synthesis/webhookdelivery/?q=msg_1",
            f"/admin/synthesis/webhookdelivery/{delivery.pk}/change/",
        )
    }
    assert all(p.status_code == 200 for p in pages.values())
    text = {url: html.unescape(p.content.decode()) for url, p in pages.items()}
    assert all(endpoint.secret not in t and "s3cret-pw" not in t for t in text.values())
    assert "https://hooks.example.com/tts" in text["/admin/synthesis/webhookendpoint/"]
    listed = text["/admin/synthesis/webhookdelivery/?q=msg_1"]
    assert "job.failed" in listed and "1 webhook delivery" in listed
    assert "receiver down" in text[f"/admin/synthesis/webhookdelivery/{delivery.pk}/change/"]
    assert admin_client.get("/admin/synthesis/webhookendpoint/add/").status_code == 403
    assert admin_client.get(f"/admin/synthesis/webhookendpoint/{endpoint.pk}/delete/").status_code == 403
    assert admin_client.get(f"/admin/synthesis/webhookdelivery/{delivery.pk}/delete/").status_code == 403
    admin_client.post(f"/admin/synthesis/webhookendpoint/{endpoint.pk}/change/", {"url": "https://evil.example"})
    endpoint.refresh_from_db()
    assert endpoint.url == "https://hook-user:s3cret-pw@hooks.example.com/tts"  # the tenant's to change


def refusal(response) -> dict:
    """The API's error body of a refused call (before: a 500 `server_error`, or audio spoken with
    another model than the organization chose)."""
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    return response.json()["error"]


def logged(live_stack, org_id: int, words: str) -> list[dict]:
    lines = []
    for raw in live_stack.web.output().splitlines():
        if raw.startswith("{") and words in raw:
            line = json.loads(raw)
            if org_id in (line.get("org_id"), line.get("organization")):
                lines.append(line)
    return lines


def test_a_bad_allowlist_stored_anyway_refuses_the_tenants_calls_saying_so(live_stack, owner):
    Organization.objects.filter(pk=owner.org.pk).update(allowed_ips=["banana"])
    with live_stack.client(owner.key) as client:
        for response in (client.get("/voices"), client.post("/audio/speech", json={"input": "Hi."})):
            error = refusal(response)
            assert response.status_code == 403 and error["code"] == "invalid_ip_allowlist", error
            assert "organization's IP allowlist" in error["message"] and "admin must correct it" in error["message"]
    assert logged(live_stack, owner.org.pk, "allowlist")


def test_a_keys_bad_scopes_or_a_plans_bad_lists_stored_anyway_are_refused_saying_so(live_stack, owner):
    _, raw = owner.org.create_api_key("scoped oddly", kind="standard")
    key = owner.org.api_keys.get(name="scoped oddly")
    type(key).objects.filter(pk=key.pk).update(scopes=5)  # a raw write no API or form takes
    with live_stack.client(raw) as client:
        odd = client.get("/voices")
    error = refusal(odd)
    assert (odd.status_code, error["code"]) == (403, "invalid_key_scopes") and key.prefix in error["message"]
    with live_stack.client(owner.key) as client:  # and it can be put right
        fixed = client.patch(f"/keys/{key.prefix}", json={"scopes": ["speech:write"]})
    assert fixed.status_code == 200 and fixed.json()["scopes"] == ["speech:write"], fixed.text
    plan = subscription_for(owner.org).plan
    Plan.objects.filter(pk=plan.pk).update(model_weights={"kokoro": "x"})
    try:
        with live_stack.client(owner.key) as client:
            unreadable = client.get("/voices")
        assert unreadable.status_code == 503, unreadable.text
        error = unreadable.json()["error"]
        assert error["code"] == "plan_misconfigured" and "model_weights" in error["message"]
        assert "is not readable" in live_stack.web.output()  # told to the operator
    finally:
        Plan.objects.filter(pk=plan.pk).update(model_weights=plan.model_weights)


def test_a_data_retention_no_api_takes_keeps_nothing(owner):
    Organization.objects.filter(pk=owner.org.pk).update(data_retention="forever")
    assert zero_retention(Organization.objects.get(pk=owner.org.pk), asked=False) is True


def test_a_bad_default_voice_stored_anyway_refuses_what_relies_on_it_saying_so(live_stack, owner):
    speech = {"input": "Defaults.", "response_format": "pcm"}
    Organization.objects.filter(pk=owner.org.pk).update(default_model="kokoro", default_voice="no_such_voice")
    with live_stack.client(owner.key) as client:
        for response in (client.post("/audio/speech", json=speech), client.post("/jobs", json={"input": "A job."})):
            error = refusal(response)  # before: 400 "voice: No voice 'no_such_voice'", a voice it did not name
            assert (response.status_code, error["code"], error["param"]) == (
                409,
                "invalid_organization_setting",
                "voice",
            )
            assert error["message"].startswith(
                "Your organization's default voice 'no_such_voice' is not a usable voice of kokoro"
            )
            assert "an owner or admin must set the default voice again" in error["message"]
        assert client.post("/audio/speech", json={**speech, "voice": "af_heart"}).status_code == 200
        assert client.post("/audio/speech", json={**speech, "model": "chattts"}).status_code == 200
        # A default model that is not served means the deployment's, as one no longer served does.
        Organization.objects.filter(pk=owner.org.pk).update(default_model="gpt-9", default_voice="")
        assert client.post("/audio/speech", json=speech).status_code == 200
    assert UsageEvent.objects.filter(organization=owner.org).order_by("-id").first().model == "chattts"
    voice = logged(live_stack, owner.org.pk, "default voice 'no_such_voice'")  # each refused request
    assert len(voice) == 2 and all(line["level"] == "ERROR" and line["setting"] == "default_voice" for line in voice)
    (model,) = logged(live_stack, owner.org.pk, "default model 'gpt-9'")  # told once, not at each request
    assert model["level"] == "WARNING" and model["setting"] == "default_model"


def test_the_websocket_protocol_says_the_default_voice_is_invalid(settings):
    settings.TTS_ENGINES = ["chattts", "kokoro"]
    org = Organization(pk=4242, name="Unsaved", default_model="kokoro", default_voice="no_such_voice")
    with pytest.raises(protocol.ProtocolError) as refused:
        protocol.parse(json.dumps({"type": "synthesize", "text": "Hi."}), organization=org)
    assert refused.value.code == "invalid_organization_setting"


def test_staff_sign_in_to_the_console_with_their_e_mail_address():
    users = get_user_model().objects
    users.create_superuser("ops", "Ops@Example.com", "pw-for-ops-12345")  # as createsuperuser makes them
    browser = Client()
    to_sign_in = browser.get("/admin/", follow=True)
    assert to_sign_in.redirect_chain[-1][0].startswith("/accounts/login/?next=")
    assert ">E-mail</label>" in to_sign_in.content.decode()
    signed_in = browser.post(
        "/accounts/login/?next=/admin/",
        {"username": "ops@example.com", "password": "pw-for-ops-12345", "next": "/admin/"},
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == "/admin/"
    assert b"Site administration" in browser.get("/admin/").content


def test_staff_land_on_their_links_and_find_them_in_the_menu_of_their_organization():
    users = get_user_model().objects
    staff = users.create_user("ops@example.com", "ops@example.com", "pw-for-ops-12345", is_staff=True)
    browser = Client()
    browser.force_login(staff)
    landing = browser.get("/dashboard/", follow=True)
    assert landing.redirect_chain[-1][0] == "/dashboard/staff"
    page = landing.content.decode()
    assert 'href="/admin/" id="staff-admin-link"' in page and 'href="/ops/" id="staff-ops-link"' in page
    assert "Create organization" not in page

    org = new_org()
    Membership.objects.create(user=staff, organization=org, role="owner")
    menu = browser.get("/dashboard/").content.decode()
    assert 'href="/admin/" id="admin-console-link"' in menu and 'href="/ops/" id="operations-link"' in menu
    tenant = users.create_user("ann@example.com", "ann@example.com", "pw-for-ann-12345")
    Membership.objects.create(user=tenant, organization=org, role="owner")
    browser.force_login(tenant)
    assert "admin-console-link" not in browser.get("/dashboard/").content.decode()
    assert browser.get("/dashboard/staff").status_code == 302  # not staff: to the console's sign-in


def test_the_console_deletes_no_organization_and_close_org_closes_one_as_its_owner_would(admin_client):
    org = new_org("Closing Co")
    listing = admin_client.get("/admin/accounts/organization/").content.decode()
    assert 'value="delete_selected"' not in listing  # "Delete selected organizations" bypassed closing
    deleted = admin_client.post(
        "/admin/accounts/organization/", {"action": "delete_selected", "_selected_action": [org.pk]}, follow=True
    )
    assert Organization.objects.filter(pk=org.pk).exists() and "No action selected" in console_messages(deleted)
    assert admin_client.post(f"/admin/accounts/organization/{org.pk}/delete/").status_code == 403
    key = ApiKey.objects.create(organization=org, name="k", prefix="tts_closex", hashed_key="h")
    UsageEvent.objects.create(organization=org, characters=10, model="kokoro", voice="af_heart")
    out = io.StringIO()
    call_command("close_org", org.slug, stdout=out)
    assert "closed (its ledger and audit log are kept)" in out.getvalue()
    org.refresh_from_db()
    key.refresh_from_db()
    assert org.suspended_at is not None and key.revoked_at is not None
    assert UsageEvent.objects.filter(organization=org).count() == 1  # the ledger stays with the operator


def test_the_consoles_index_names_models_as_english_does(admin_client):
    index = admin_client.get("/admin/").content.decode()
    assert ">API keys<" in index and ">Webhook deliveries<" in index  # were "Api keys", "Webhook deliverys"
    assert "deliverys" not in index and "Api keys" not in index
    assert '<a href="/ops/" id="ops-link">' in index  # the operations page, from every console page
    icon = admin_client.get("/favicon.ico")  # what the admin's pages (which name no icon) make a browser ask for
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml" and b"<svg" in icon.content


def test_the_ledger_and_jobs_say_model_key_and_units_and_filter_by_organization_and_date(admin_client):
    org, other = new_org("Ledgerco"), new_org("Otherco")
    key, _ = org.create_api_key("ci")
    UsageEvent.objects.create(
        organization=org, api_key=key, characters=12, model="kokoro", voice="alloy", audio_seconds=1.6746666666666667
    )
    UsageEvent.objects.create(organization=other, characters=5, model="chattts", voice="alloy", latency_ms=1234)
    page = admin_client.get("/admin/billing/usageevent/").content.decode()
    # Before: no model or key column, seconds as 1.6746666666666667, no organization or date filter.
    assert "1.7 s" in page and "1.6746666666666667" not in page and "1,234 ms" in page
    assert f"ci (tts_{key.prefix}_…)" in html.unescape(page) and ">kokoro<" in page
    assert "By organization" in page and "By created at" in page
    narrowed = admin_client.get(f"/admin/billing/usageevent/?organization__id__exact={other.pk}").content.decode()
    assert "1.7 s" not in narrowed and "1,234 ms" in narrowed
    make_job(org, api_key=key, model="kokoro", audio_seconds=1.6746666666666667)
    make_job(other)
    jobs = admin_client.get("/admin/synthesis/job/").content.decode()
    assert "By organization" in jobs and "By model" in jobs and "1.7 s" in jobs
    assert f"ci (tts_{key.prefix}_…)" in html.unescape(jobs)
