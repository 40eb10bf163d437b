"""The team page through Django's test client: no "invited" row outlives an acceptance (by any
path), resending and renewing invitations (a new link; e-mailed, or offered where this server
sends no e-mail; throttled with inviting), role changes by the rules of accounts.actions (the
last owner stays), what each role may do, and another organization's ids (404). The actions'
rules are also tested directly."""

from __future__ import annotations

import html
import re
import smtplib
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend as LocmemBackend
from django.test import Client
from django.utils import timezone

from accounts import actions
from accounts.models import ApiKey, AuditEvent, Invitation, Membership, Organization
from billing.models import UsageEvent

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


class DeliveringBackend(LocmemBackend):
    """Stands for a real mail server (not one of the backends that deliver nothing); mail still
    lands in mail.outbox."""


class FailingBackend(LocmemBackend):
    """A mail server that does not take the message (as smtplib fails: an OSError)."""

    def send_messages(self, messages):
        raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")


def signup(client, email="ada@example.com", org="Analytical Engines") -> Membership:
    response = client.post("/dashboard/signup", {"email": email, "password": PASSWORD, "organization": org})
    assert response.status_code == 302
    return Membership.objects.get(user__username=email, organization__name=org)


def add_member(org, email: str, role: str = "member") -> Membership:
    user = get_user_model().objects.create_user(email, email, PASSWORD)
    return Membership.objects.create(user=user, organization=org, role=role)


def text(response) -> str:
    """The page as a user reads it: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def messages_of(response) -> str:
    found = re.search(r'<ul class="messages">(.*?)</ul>', response.content.decode(), re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split()) if found else ""


def invited_rows(response) -> list[str]:
    """The addresses of the page's pending-invitation rows."""
    return re.findall(r'<tr class="muted" data-invitation="([^"]+)"', response.content.decode())


def member_row(response, email: str) -> str:
    found = re.search(rf'<tr data-member="{re.escape(email)}">(.*?)</tr>', response.content.decode(), re.S)
    assert found, f"no row for {email}"
    return found.group(1)


def links_in_mail() -> list[str]:
    return [re.search(r"/dashboard/invite/\S+", m.body).group(0) for m in mail.outbox]


# No "invited" row stays after an acceptance


def test_accepting_closes_every_pending_invitation_to_that_address(client):
    """Before: accepting one invitation left the others (one an operator typed in another case, a
    second from a double submit, an expired one) as "invited" rows for a member."""
    owner = signup(client)
    org = owner.organization
    typed = Invitation.objects.create(organization=org, email="Bob@Example.com")  # as the admin site stores it
    refused = client.post("/dashboard/members", {"email": "bob@example.com", "role": "admin"})
    assert "bob@example.com is invited already" in text(refused)  # any case counts
    double = Invitation.objects.create(organization=org, email="bob@example.com", role="admin")
    expired = Invitation.objects.create(
        organization=org, email="bob@example.com", created_at=timezone.now() - timedelta(days=9)
    )
    assert sorted(invited_rows(client.get("/dashboard/members"))) == [
        "Bob@Example.com",
        "bob@example.com",
        "bob@example.com",
    ]
    client.logout()
    joined = client.post(f"/dashboard/invite/{double.token}", {"password": "bobs long password"}, follow=True)
    assert "Welcome to Analytical Engines: you joined as admin." in messages_of(joined)
    client.force_login(owner.user)
    page = client.get("/dashboard/members")
    assert invited_rows(page) == []
    assert "admin" in member_row(page, "bob@example.com")
    for invitation in (typed, expired):
        invitation.refresh_from_db()
        assert invitation.accepted_at is not None
        client.logout()
        used = client.get(f"/dashboard/invite/{invitation.token}")  # done: no second use
        assert used.status_code == 410 and "This invitation was used or has expired" in text(used)
        assert 'href="/accounts/login/"' in used.content.decode()


def test_a_signed_in_invitee_joins_by_an_invitation_typed_in_another_case(client):
    """Before: the signed-in path compared the address in one case only and refused (403)."""
    owner = signup(client)
    typed = Invitation.objects.create(organization=owner.organization, email="Carol@Example.com")
    carol = get_user_model().objects.create_user("carol@example.com", "carol@example.com", PASSWORD)
    client.logout()
    assert client.login(username="CAROL@example.com", password=PASSWORD)  # signs in in any case too
    assert client.get(f"/dashboard/invite/{typed.token}").status_code == 200
    joined = client.post(f"/dashboard/invite/{typed.token}", follow=True)
    assert "You are a member of Analytical Engines, as member." in messages_of(joined)
    assert Membership.objects.filter(user=carol, organization=owner.organization).exists()
    client.force_login(owner.user)
    assert invited_rows(client.get("/dashboard/members")) == []


def test_a_member_already_who_accepts_keeps_their_role_and_no_row_remains(client):
    owner = signup(client)
    dora = add_member(owner.organization, "dora@example.com", role="admin")
    stale = Invitation.objects.create(organization=owner.organization, email="dora@example.com")
    # A member is not shown as invited, even while such an invitation is pending.
    page = client.get("/dashboard/members")
    assert invited_rows(page) == [] and "dora@example.com" in member_row(page, "dora@example.com")
    client.force_login(dora.user)
    shown = client.get(f"/dashboard/invite/{stale.token}")
    assert "You are a member of Analytical Engines already, as admin" in text(shown)
    joined = client.post(f"/dashboard/invite/{stale.token}", follow=True)
    assert "You are a member of Analytical Engines, as admin." in messages_of(joined)
    dora.refresh_from_db()
    stale.refresh_from_db()
    assert dora.role == "admin" and stale.accepted_at is not None


# Resend and renew


def test_resend_mails_a_new_link_and_the_earlier_one_stops_working(client):
    signup(client)
    client.post("/dashboard/members", {"email": "dave@example.com", "role": "member"})
    invitation = Invitation.objects.get(email="dave@example.com")
    resent = client.post(f"/dashboard/invitations/{invitation.pk}/resend", follow=True)
    assert len(mail.outbox) == 2 and mail.outbox[1].to == ["dave@example.com"]
    first, second = links_in_mail()
    assert first != second
    # The test settings' backend (locmem) delivers to nobody: the page says so and gives the new link.
    said = messages_of(resent)
    assert "New link for dave@example.com" in said and "the earlier link no longer works" in said
    assert f"send them the link yourself: http://testserver{second}" in said
    assert f'data-link="http://testserver{second}"' in resent.content.decode()  # Copy link: the new one
    client.logout()
    assert client.get(first).status_code == 404
    assert client.get(second).status_code == 200


def test_with_a_mail_server_resend_says_it_was_e_mailed_and_shows_no_link(client, settings):
    settings.EMAIL_BACKEND = f"{__name__}.DeliveringBackend"
    signup(client)
    invited = client.post("/dashboard/members", {"email": "dave@example.com", "role": "member"}, follow=True)
    assert messages_of(invited) == "Invitation e-mailed to dave@example.com."
    assert "They get an e-mail with a link" in text(invited)
    invitation = Invitation.objects.get()
    resent = client.post(f"/dashboard/invitations/{invitation.pk}/resend", follow=True)
    said = messages_of(resent)
    assert said.startswith("Invitation e-mailed again to dave@example.com with a new link, valid until")
    assert "/dashboard/invite/" not in said and len(mail.outbox) == 2


def test_with_the_console_backend_resend_offers_the_link(client, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    signup(client)
    page = client.get("/dashboard/members")
    assert "This server does not send e-mail: you get a link to pass on yourself" in text(page)
    client.post("/dashboard/members", {"email": "dave@example.com", "role": "member"})
    invitation = Invitation.objects.get()
    resent = client.post(f"/dashboard/invitations/{invitation.pk}/resend", follow=True)
    invitation.refresh_from_db()
    assert f"send them the link yourself: http://testserver/dashboard/invite/{invitation.token}" in messages_of(resent)


def test_an_expired_invitation_is_shown_as_expired_and_renewed(client):
    owner = signup(client)
    old = Invitation.objects.create(
        organization=owner.organization, email="erin@example.com", created_at=timezone.now() - timedelta(days=8)
    )
    page = client.get("/dashboard/members")
    row = re.search(r'data-invitation="erin@example.com">(.*?)</tr>', page.content.decode(), re.S).group(1)
    assert "expired" in row and "Renew" in row and "Copy link" not in row
    client.logout()
    assert client.get(f"/dashboard/invite/{old.token}").status_code == 410  # expired: it says so
    client.force_login(owner.user)
    renewed = client.post(f"/dashboard/invitations/{old.pk}/resend", follow=True)
    old.refresh_from_db()
    until = (timezone.now() + Invitation.VALID_FOR).date().isoformat()
    row = re.search(r'data-invitation="erin@example.com">(.*?)</tr>', renewed.content.decode(), re.S).group(1)
    assert f"link valid until {until}" in html.unescape(row) and "Resend" in row and "expired" not in row
    client.logout()
    assert client.get(f"/dashboard/invite/{old.token}").status_code == 200


def test_inviting_an_address_whose_invitation_expired_replaces_it(client):
    owner = signup(client)
    Invitation.objects.create(
        organization=owner.organization, email="erin@example.com", created_at=timezone.now() - timedelta(days=8)
    )
    assert client.post("/dashboard/members", {"email": "Erin@example.com", "role": "admin"}).status_code == 302
    invitation = Invitation.objects.get()  # one row: the new one
    assert invitation.is_open and invitation.role == "admin"
    assert invited_rows(client.get("/dashboard/members")) == ["erin@example.com"]


def test_resending_counts_against_the_invitation_throttle(client, settings):
    settings.TTS_INVITE_RATE = "3/h"
    signup(client)
    client.post("/dashboard/members", {"email": "dave@example.com", "role": "member"})
    invitation = Invitation.objects.get()
    for _ in range(2):
        assert client.post(f"/dashboard/invitations/{invitation.pk}/resend").status_code == 302
    throttled = client.post(f"/dashboard/invitations/{invitation.pk}/resend")
    assert throttled.status_code == 429 and throttled["Retry-After"] == "60"
    assert client.post("/dashboard/members", {"email": "x@example.com", "role": "member"}).status_code == 429
    assert len(mail.outbox) == 3


def test_resend_is_for_admins_of_the_organization_and_pending_invitations(client):
    owner = signup(client)
    pending = Invitation.objects.create(organization=owner.organization, email="dave@example.com")
    accepted = Invitation.objects.create(
        organization=owner.organization, email="x@example.com", accepted_at=timezone.now()
    )
    other = Organization.objects.create(name="Globex", slug="globex")
    foreign = Invitation.objects.create(organization=other, email="y@example.com")
    assert client.post(f"/dashboard/invitations/{foreign.pk}/resend").status_code == 404
    assert client.post(f"/dashboard/invitations/{accepted.pk}/resend").status_code == 404
    bob = add_member(owner.organization, "bob@example.com")
    client.force_login(bob.user)
    refused = client.post(f"/dashboard/invitations/{pending.pk}/resend")
    assert refused.status_code == 403 and "Only owners and admins resend invitations" in text(refused)
    assert mail.outbox == [] and Invitation.objects.get(pk=pending.pk).token == pending.token


# Roles


def test_an_owner_changes_roles_and_the_only_owner_stays_owner(client):
    owner = signup(client)
    bob = add_member(owner.organization, "bob@example.com")
    page = client.get("/dashboard/members")
    assert 'aria-label="Role of bob@example.com"' in member_row(page, "bob@example.com")
    own = member_row(page, "ada@example.com")
    assert "<select" not in own and "the only owner: make someone else owner before changing this role" in own
    made = client.post(f"/dashboard/members/{bob.pk}/role", {"role": "admin"}, follow=True)
    assert messages_of(made) == "bob@example.com is now admin."
    assert '<option value="admin" selected>' in member_row(made, "bob@example.com")
    same = client.post(f"/dashboard/members/{bob.pk}/role", {"role": "admin"}, follow=True)
    assert messages_of(same) == "bob@example.com is already admin."
    refused = client.post(f"/dashboard/members/{owner.pk}/role", {"role": "member"}, follow=True)
    assert messages_of(refused) == ("Not changed: ada@example.com is the only owner: make someone else owner first.")
    owner.refresh_from_db()
    assert owner.role == "owner"
    # With a second owner the first may step down.
    assert "is now owner" in messages_of(
        client.post(f"/dashboard/members/{bob.pk}/role", {"role": "owner"}, follow=True)
    )
    down = client.post(f"/dashboard/members/{owner.pk}/role", {"role": "admin"}, follow=True)
    assert messages_of(down) == "You are now admin."
    assert list(Membership.objects.order_by("pk").values_list("role", flat=True)) == ["admin", "owner"]
    bad = client.post(f"/dashboard/members/{bob.pk}/role", {"role": "emperor"}, follow=True)
    assert messages_of(bad) == "Not changed: choose owner, admin or member."


def test_an_admin_may_only_make_a_member_an_admin(client):
    owner = signup(client)
    org = owner.organization
    admin = add_member(org, "adam@example.com", role="admin")
    other_admin = add_member(org, "alex@example.com", role="admin")
    bob = add_member(org, "bob@example.com")
    client.force_login(admin.user)
    page = client.get("/dashboard/members")
    assert "<select" in member_row(page, "bob@example.com")
    for email in ("ada@example.com", "alex@example.com", "adam@example.com"):
        assert "<select" not in member_row(page, email)
    assert "Remove" not in page.content.decode()  # owners remove
    made = client.post(f"/dashboard/members/{bob.pk}/role", {"role": "admin"}, follow=True)
    assert messages_of(made) == "bob@example.com is now admin."
    for target, role in ((bob, "member"), (other_admin, "member"), (owner, "admin"), (admin, "owner")):
        refused = client.post(f"/dashboard/members/{target.pk}/role", {"role": role})
        assert refused.status_code == 403, (target, role)
        assert "admins may make a member an admin, nothing more" in text(refused)
    assert list(Membership.objects.order_by("pk").values_list("role", flat=True)) == [
        "owner",
        "admin",
        "admin",
        "admin",
    ]


def test_a_member_cannot_change_roles_and_another_organizations_membership_is_404(client):
    owner = signup(client)
    bob = add_member(owner.organization, "bob@example.com")
    other = Organization.objects.create(name="Globex", slug="globex")
    stranger = add_member(other, "eve@example.com")
    assert client.post(f"/dashboard/members/{stranger.pk}/role", {"role": "owner"}).status_code == 404
    client.force_login(bob.user)
    page = client.get("/dashboard/members")
    assert "<select" not in page.content.decode().split("<main", 1)[1]  # no role select (nor the org switch)
    assert "Your role (member) can see the team but not invite people or change roles." in text(page)
    refused = client.post(f"/dashboard/members/{bob.pk}/role", {"role": "owner"})
    assert refused.status_code == 403 and "Only owners and admins change roles." in text(refused)
    assert "Back to the overview" in text(refused)  # the dashboard's 403 page
    stranger.refresh_from_db()
    bob.refresh_from_db()
    assert stranger.role == "member" and bob.role == "member"


def test_a_suspended_organization_resends_nothing_and_changes_no_role(client):
    owner = signup(client)
    bob = add_member(owner.organization, "bob@example.com")
    pending = Invitation.objects.create(organization=owner.organization, email="dave@example.com")
    Organization.objects.update(suspended_at=timezone.now(), suspension_reason="unpaid")
    assert client.post(f"/dashboard/invitations/{pending.pk}/resend").status_code == 403
    assert client.post(f"/dashboard/members/{bob.pk}/role", {"role": "admin"}).status_code == 403
    assert mail.outbox == [] and Membership.objects.get(pk=bob.pk).role == "member"


def test_the_page_says_what_each_role_may_do_and_the_checks_agree(client):
    owner = signup(client)
    admin = add_member(owner.organization, "adam@example.com", role="admin")
    bob = add_member(owner.organization, "bob@example.com")
    shown = text(client.get("/dashboard/members"))
    assert "What each role may do" in shown
    assert "member Uses the playground (billed to the organization), makes and manages their own API keys" in shown
    assert "admin Everything a member does, and: sees, creates and revokes every API key" in shown
    assert "owner Everything an admin does, and: gives anyone any role" in shown
    assert "removes members" in shown and "the only owner can be neither demoted nor removed" in shown
    # What the text says of admins and members, as the views check it.
    client.force_login(admin.user)
    assert client.post("/dashboard/keys", {"name": "ci", "kind": "standard", "expires": "never"}).status_code == 302
    assert client.post("/dashboard/members", {"email": "new@example.com", "role": "admin"}).status_code == 302
    assert client.post(f"/dashboard/members/{bob.pk}/remove").status_code == 403
    client.force_login(bob.user)
    assert client.post("/dashboard/keys", {"name": "x", "kind": "standard", "expires": "never"}).status_code == 302
    assert (
        client.post("/dashboard/keys", {"name": "y", "kind": "admin", "expires": "never"}).status_code == 200
    )  # refused
    assert not ApiKey.objects.filter(name="y").exists()
    assert client.post("/dashboard/members", {"email": "new2@example.com", "role": "member"}).status_code == 403


def test_the_team_page_is_accessible(client):
    signup(client)
    add_member(Organization.objects.get(), "bob@example.com")
    client.post("/dashboard/members", {"email": "dave@example.com", "role": "member"})
    page = client.get("/dashboard/members").content.decode()
    assert '<div class="card table-wrap"><table id="team">' in page
    assert page.count('<th scope="col">') == 4 and "<th>" not in page
    assert 'aria-label="Save role of bob@example.com"' in page
    assert 'aria-label="Copy link for dave@example.com"' in page
    assert 'aria-label="Resend invitation to dave@example.com"' in page
    # Destructive actions: quiet buttons, confirmed first; the one filled button is Invite.
    withdraw = re.search(r"<form[^>]*revoke[^>]*>.*?</form>", page, re.S).group(0)
    assert "return confirm(" in withdraw and '<button class="quiet destructive"' in withdraw
    remove = re.search(r"<form[^>]*remove[^>]*>.*?</form>", page, re.S).group(0)
    assert "return confirm(" in remove and '<button class="quiet destructive"' in remove
    main = page.split('<main id="main">', 1)[1]
    assert re.findall(r"<button(?![^>]*quiet)[^>]*>([^<]*)</button>", main) == ["Invite"]
    # A field in error is tied to its message (dashboard/field.html).
    wrong = client.post("/dashboard/members", {"email": "not an address", "role": "member"}).content.decode()
    assert 'aria-invalid="true"' in wrong and 'id="id_email_error"' in wrong


# The rules themselves


def test_assignable_roles():
    org = Organization(name="o", slug="o")

    def m(role, pk):
        return Membership(pk=pk, organization=org, role=role)

    owner, admin, member = m("owner", 1), m("admin", 2), m("member", 3)
    assert actions.assignable_roles(owner, member) == ["owner", "admin", "member"]
    assert actions.assignable_roles(owner, owner) == ["owner", "admin", "member"]
    assert actions.assignable_roles(admin, member) == ["member", "admin"]
    assert actions.assignable_roles(admin, m("admin", 4)) == []
    assert actions.assignable_roles(admin, admin) == []
    assert actions.assignable_roles(admin, owner) == []
    assert actions.assignable_roles(member, m("member", 5)) == []


def test_change_role():
    ada, org = actions.sign_up("ada@example.com", PASSWORD, "Analytical Engines")
    owner = Membership.objects.get(user=ada)
    bob = add_member(org, "bob@example.com")
    with pytest.raises(actions.NotAllowed):
        actions.change_role(bob, owner.pk, "member")
    with pytest.raises(ValueError):
        actions.change_role(owner, bob.pk, "root")
    with pytest.raises(actions.LastOwner):
        actions.change_role(owner, owner.pk, "admin")
    _, other = actions.sign_up("eve@example.com", PASSWORD, "Globex")
    eve = Membership.objects.get(organization=other)
    with pytest.raises(Membership.DoesNotExist):
        actions.change_role(owner, eve.pk, "member")
    assert actions.change_role(owner, bob.pk, "owner") == (Membership.objects.get(pk=bob.pk), True)
    assert Membership.objects.get(pk=bob.pk).role == "owner"
    assert actions.change_role(owner, bob.pk, "owner")[1] is False
    bob.refresh_from_db()
    changed, done = actions.change_role(bob, owner.pk, "member")  # two owners: one may go
    assert done and changed.role == "member"
    with pytest.raises(actions.NotAllowed):  # ada, a member now, whatever her old object says
        actions.change_role(owner, bob.pk, "member")
    with pytest.raises(actions.LastOwner):
        actions.change_role(Membership.objects.get(pk=bob.pk), bob.pk, "member")


# Races: the acting role and the invitation's link, read again under the lock


def _invited(email="dave@example.com"):
    """An organization (ada, its owner) and a pending invitation to `email`."""
    ada, org = actions.sign_up("ada@example.com", PASSWORD, "Analytical Engines")
    owner = Membership.objects.get(user=ada)
    invitation = actions.invite(org, email, "member", invited_by=ada, accept_url=str)
    return owner, invitation


def test_a_link_resent_after_the_lookup_is_not_accepted():
    """The accept view finds the invitation by its link outside the transaction; a resend that
    commits before the acceptance locks the row must kill that link, for both ways in."""
    owner, invitation = _invited()
    dave = get_user_model().objects.create_user("dave@example.com", "dave@example.com", PASSWORD)
    stale = Invitation.objects.get(token=invitation.token)  # what the view looked up
    actions.resend_invitation(owner, invitation.pk, accept_url=str)
    with pytest.raises(actions.InvitationUsed):
        actions.accept_invitation(stale, dave)
    assert not Membership.objects.filter(user=dave).exists()
    dave.delete()
    with pytest.raises(actions.InvitationUsed):
        actions.accept_invitation_as_new_user(stale, PASSWORD)
    assert not actions.has_account("dave@example.com")
    fresh = Invitation.objects.get()
    assert fresh.is_open and fresh.token != stale.token  # the new link still works
    user = actions.accept_invitation_as_new_user(fresh, PASSWORD)
    assert Membership.objects.get(user=user).role == "member"


def test_a_link_withdrawn_after_the_lookup_is_not_accepted_and_is_no_error():
    owner, invitation = _invited()
    dave = get_user_model().objects.create_user("dave@example.com", "dave@example.com", PASSWORD)
    stale = Invitation.objects.get(token=invitation.token)
    actions.revoke_invitation(owner, invitation.pk)
    with pytest.raises(actions.InvitationUsed):  # not Invitation.DoesNotExist (a 500)
        actions.accept_invitation(stale, dave)
    with pytest.raises(actions.InvitationUsed):
        actions.accept_invitation_as_new_user(stale, PASSWORD)
    assert not Membership.objects.filter(user=dave).exists()
    assert list(get_user_model().objects.values_list("username", flat=True).order_by("username")) == [
        "ada@example.com",
        "dave@example.com",
    ]


def test_an_owner_demoted_after_being_read_removes_nobody():
    ada, org = actions.sign_up("ada@example.com", PASSWORD, "Analytical Engines")
    stale = Membership.objects.get(user=ada)  # read as owner (request.membership)
    bob = add_member(org, "bob@example.com", role="owner")
    carol = add_member(org, "carol@example.com")
    Membership.objects.filter(pk=stale.pk).update(role="member")  # demoted meanwhile
    assert stale.role == "owner"
    for target in (carol, bob, stale):
        with pytest.raises(actions.NotAllowed):
            actions.remove_member(stale, target.pk)
    assert Membership.objects.filter(organization=org).count() == 3
    # Removed meanwhile: nothing either.
    gone = Membership.objects.get(pk=stale.pk)
    gone.role = "owner"
    Membership.objects.filter(pk=gone.pk).delete()
    with pytest.raises(actions.NotAllowed):
        actions.remove_member(gone, carol.pk)
    assert Membership.objects.filter(pk=carol.pk).exists()


def test_remove_member_keeps_the_last_owner_and_reads_roles_under_the_lock():
    ada, org = actions.sign_up("ada@example.com", PASSWORD, "Analytical Engines")
    owner = Membership.objects.get(user=ada)
    bob = add_member(org, "bob@example.com")
    assert actions.remove_member(owner, owner.pk) is None  # the only owner stays
    assert Membership.objects.filter(pk=owner.pk, role="owner").exists()
    # bob's object says member; he was made owner since: as the last-but-one owner he may go.
    Membership.objects.filter(pk=bob.pk).update(role="owner")
    removed = actions.remove_member(owner, bob.pk)
    assert removed is not None and removed.user.email == "bob@example.com"
    assert not Membership.objects.filter(pk=bob.pk).exists()
    assert actions.remove_member(owner, owner.pk) is None  # the only owner again
    _, other = actions.sign_up("eve@example.com", PASSWORD, "Globex")
    with pytest.raises(Membership.DoesNotExist):
        actions.remove_member(owner, Membership.objects.get(organization=other).pk)


def test_a_demoted_owner_gets_403_from_remove(client):
    owner = signup(client)
    bob = add_member(owner.organization, "bob@example.com", role="owner")
    carol = add_member(owner.organization, "carol@example.com")
    Membership.objects.filter(pk=owner.pk).update(role="admin")
    assert client.post(f"/dashboard/members/{carol.pk}/remove").status_code == 403
    assert client.post(f"/dashboard/members/{bob.pk}/remove").status_code == 403
    assert Membership.objects.filter(organization=owner.organization).count() == 3


# A mail server that fails: nothing changes, and the page says so


def test_resend_whose_mail_fails_keeps_the_earlier_link(client, settings):
    owner, invitation = _invited()
    settings.EMAIL_BACKEND = f"{__name__}.FailingBackend"
    with pytest.raises(actions.MailNotSent):
        actions.resend_invitation(owner, invitation.pk, accept_url=str)
    kept = Invitation.objects.get()
    assert (kept.token, kept.created_at) == (invitation.token, invitation.created_at)  # rolled back
    client.force_login(owner.user)
    resent = client.post(f"/dashboard/invitations/{invitation.pk}/resend", follow=True)
    assert resent.status_code == 200
    said = messages_of(resent)
    assert "could not be e-mailed again" in said and "the earlier link still works" in said
    assert '<li class="error" role="alert">' in resent.content.decode()  # not styled as a success
    assert Invitation.objects.get().token == invitation.token
    Invitation.objects.update(created_at=timezone.now() - timedelta(days=8))  # renewing an expired one fails too
    said = messages_of(client.post(f"/dashboard/invitations/{invitation.pk}/resend", follow=True))
    assert "nothing changed, its link stays expired" in said
    Invitation.objects.update(created_at=timezone.now())
    client.logout()
    assert client.get(f"/dashboard/invite/{invitation.token}").status_code == 200


def test_an_address_that_signs_up_meanwhile_makes_the_acceptance_a_used_link(monkeypatch):
    """Two ways to the same new account at once (two organizations' invitations, or a sign-up):
    the second to commit finds the address taken and gets the used-link answer, not a 500."""
    _, invitation = _invited()
    actions.create_user("dave@example.com", PASSWORD)  # committed after the lookup for an account
    monkeypatch.setattr(actions, "has_account", lambda email: False)  # as it answered before that
    with pytest.raises(actions.InvitationUsed):
        actions.accept_invitation_as_new_user(invitation, PASSWORD)
    assert not Membership.objects.filter(user__username="dave@example.com").exists()


def test_an_invitation_whose_mail_fails_is_not_made(client, settings):
    owner = signup(client)
    expired = Invitation.objects.create(
        organization=owner.organization, email="erin@example.com", created_at=timezone.now() - timedelta(days=8)
    )
    settings.EMAIL_BACKEND = f"{__name__}.FailingBackend"
    with pytest.raises(actions.MailNotSent):
        actions.invite(owner.organization, "dave@example.com", "member", invited_by=owner.user, accept_url=str)
    assert list(Invitation.objects.values_list("pk", flat=True)) == [expired.pk]
    page = client.post("/dashboard/members", {"email": "Erin@example.com", "role": "admin"})
    assert page.status_code == 200
    assert "could not be sent (the mail server did not take it), so no invitation was made" in text(page)
    assert 'value="Erin@example.com"' in page.content.decode()  # the form comes back filled in
    assert list(Invitation.objects.values_list("pk", flat=True)) == [expired.pk]  # not even replaced
    settings.EMAIL_BACKEND = f"{__name__}.DeliveringBackend"
    again = client.post("/dashboard/members", {"email": "Erin@example.com", "role": "admin"}, follow=True)
    assert messages_of(again) == "Invitation e-mailed to erin@example.com."
    assert Invitation.objects.get().is_open


def test_a_used_expired_or_unknown_invitation_link_says_which_with_a_way_on(client):
    """Before: every dead link was the generic 404 "There is no page at /dashboard/invite/…"."""
    owner = signup(client)
    expired = Invitation.objects.create(organization=owner.organization, email="late@example.com")
    Invitation.objects.filter(pk=expired.pk).update(created_at=expired.created_at - Invitation.VALID_FOR)
    client.logout()
    gone = client.get(f"/dashboard/invite/{expired.token}")
    assert gone.status_code == 410
    assert "This invitation was used or has expired" in text(gone) and "ask whoever invited you" in text(gone)
    assert 'href="/accounts/login/"' in gone.content.decode() and "There is no page" not in text(gone)
    unknown = client.get("/dashboard/invite/not-a-token")
    assert unknown.status_code == 404 and "This invitation link is not known" in text(unknown)


def test_a_removed_member_is_told_and_can_start_an_organization_while_signed_in(client):
    """Before: a removed member who signed in landed on "Create your organization", which asked for
    an e-mail and password again and then said "An account with this e-mail exists already"."""
    owner = signup(client)
    bob = add_member(owner.organization, "bob@example.com")
    client.post(f"/dashboard/members/{bob.pk}/remove")
    bob_client = Client()
    assert bob_client.post("/accounts/login/", {"username": "bob@example.com", "password": PASSWORD}).status_code == 302
    landed = bob_client.get("/dashboard/", follow=True)
    page = text(landed)
    assert "You were removed from Analytical Engines." in page and "Signed in as bob@example.com" in page
    assert 'name="password"' not in landed.content.decode() and 'name="email"' not in landed.content.decode()
    made = bob_client.post("/dashboard/signup", {"organization": "Bob's Lab"}, follow=True)
    assert "Bob's Lab is made, with you as its owner." in messages_of(made)
    assert Membership.objects.get(user=bob.user, organization__name="Bob's Lab").role == "owner"
    # A member who has an organization starts a second one, and switches between them in the header.
    assert "New organization" in text(client.get("/dashboard/"))
    client.post("/dashboard/signup", {"organization": "Second Engines"})
    header = client.get("/dashboard/").content.decode().split("</header>")[0]
    assert 'aria-label="Organization"' in header and "Analytical Engines" in header and "Second Engines" in header


def test_the_account_page_changes_the_password_lists_sessions_and_deletes_the_account(client):
    """Before: no account page; the password change was an unlinked page in Django-admin's look."""
    owner = signup(client)
    page = client.get("/dashboard/")
    assert 'href="/dashboard/account"' in page.content.decode().split("</header>")[0]
    account = client.get("/dashboard/account")
    shown = text(account)
    assert "ada@example.com" in shown and "Where you are signed in" in shown
    assert "You are the last owner of Analytical Engines" in shown  # deleting is refused, with the way out
    assert client.post("/dashboard/account", {"password": PASSWORD}).status_code == 200
    assert get_user_model().objects.filter(email="ada@example.com").exists()
    change = client.get("/accounts/password_change/")
    assert "Back to your account" in text(change) and "Django administration" not in text(change)
    sessions = client.get("/accounts/sessions/")
    assert sessions.status_code == 200 and "Django administration" not in text(sessions)

    bob = add_member(owner.organization, "bob@example.com")
    _, bobs_key = owner.organization.create_api_key("bob's", kind="standard")
    ApiKey.objects.filter(prefix=bobs_key.split("_")[1]).update(owner=bob.user)
    bob_client = Client()
    bob_client.force_login(bob.user)
    wrong = bob_client.post("/dashboard/account", {"password": "not it"})
    assert "That is not your password." in text(wrong)
    gone = bob_client.post("/dashboard/account", {"password": PASSWORD}, follow=True)
    assert "The account bob@example.com is deleted." in messages_of(gone)
    assert not get_user_model().objects.filter(email="bob@example.com").exists()
    assert ApiKey.objects.get(prefix=bobs_key.split("_")[1]).revoked_at is not None
    assert AuditEvent.objects.filter(organization=owner.organization, action="account.deleted").exists()


def test_organization_settings_rename_leave_and_close(client):
    """Before: no organization settings at all: no rename, no leave, no delete."""
    owner = signup(client)
    org = owner.organization
    renamed = client.post("/dashboard/organization", {"action": "rename", "name": "Difference Engines"}, follow=True)
    assert "The organization is now named Difference Engines." in messages_of(renamed)
    assert "audio of asynchronous jobs is kept" in text(client.get("/dashboard/organization"))
    settings_page = client.get("/dashboard/organization").content.decode()  # leaving is not offered to the only owner
    assert 'value="leave"' not in settings_page and "You are its only owner, so you cannot leave it" in settings_page
    refused = client.post("/dashboard/organization", {"action": "leave"}, follow=True)  # posted anyway: refused
    assert "You are the last owner of Difference Engines" in messages_of(refused)
    bob = add_member(org, "bob@example.com")
    bob_client = Client()
    bob_client.force_login(bob.user)
    assert 'value="leave"' in bob_client.get("/dashboard/organization").content.decode()
    assert (
        bob_client.post(
            "/dashboard/organization", {"action": "close", "confirm_name": "Difference Engines"}
        ).status_code
        == 403
    )
    left = bob_client.post("/dashboard/organization", {"action": "leave"}, follow=True)
    assert "You left Difference Engines." in messages_of(left) and not Membership.objects.filter(pk=bob.pk).exists()
    key, _ = org.create_api_key("ci")
    UsageEvent.objects.create(organization=org, api_key=key, characters=5, model="chattts")
    typo = client.post("/dashboard/organization", {"action": "close", "confirm_name": "Difference"}, follow=True)
    assert "Type the organization's name" in messages_of(typo) and Membership.objects.filter(organization=org).exists()
    closed = client.post(
        "/dashboard/organization", {"action": "close", "confirm_name": "Difference Engines"}, follow=True
    )
    assert "Difference Engines is closed." in messages_of(closed)
    org.refresh_from_db()  # used once: kept as a closed record for the ledger
    assert org.suspended_at is not None and not Membership.objects.filter(organization=org).exists()
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    assert AuditEvent.objects.filter(organization=org, action="organization.closed").exists()
    assert "You are not a member of any organization" in text(closed)  # and the way on
