"""Pronunciation lexicons: list, create, edit (the entries one a line), delete; owners and admins
change them, members read them. `synthesis.lexicons.save_lexicon` validates, as for the API."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.tenancy import scoped
from billing.limits import limits_for
from tts_saas.errors import ApiError
from voices.lexicons import save_lexicon
from voices.models import Lexicon

from ..access import member_required, page, require_admin
from ..forms import LexiconForm, entry_lines


@member_required
def lexicons(request):
    org = request.principal.organization
    form = LexiconForm(request.POST or None)
    if request.method == "POST":
        require_admin(request, "change lexicons")
        saved = _save(form, Lexicon(organization=org))
        if saved is not None:
            messages.info(request, f"Lexicon {saved.name} created with {_entries(saved)}.")
            return redirect("dashboard:lexicons")
    return _page(request, "lexicons.html", form=form, lexicons=scoped(Lexicon, org).order_by("created_at"))


@member_required
def lexicon(request, lexicon_id: str):
    found = _lexicon(request, lexicon_id)
    name = found.name  # a failed save may have changed the object, not the row
    if request.method == "POST":
        require_admin(request, "change lexicons")
        form = LexiconForm(request.POST)
        saved = _save(form, found)
        if saved is not None:
            messages.info(request, f"Lexicon {saved.name} saved with {_entries(saved)}.")
            return redirect("dashboard:lexicons")
    else:
        form = LexiconForm(
            initial={"name": found.name, "is_default": found.is_default, "entries": entry_lines(found.entries)}
        )
    return _page(request, "lexicon.html", form=form, lexicon=found, name=name)


@require_POST
@member_required
def delete_lexicon(request, lexicon_id: str):
    require_admin(request, "change lexicons")
    found = _lexicon(request, lexicon_id)
    found.delete()
    messages.info(request, f"Lexicon {found.name} deleted: requests that name {lexicon_id} are refused from now on.")
    return redirect("dashboard:lexicons")


def _lexicon(request, lexicon_id: str) -> Lexicon:
    found = scoped(Lexicon, request.principal.organization).filter(pk=lexicon_id).first()
    if found is None:
        raise Http404
    return found


def _save(form: LexiconForm, lexicon: Lexicon) -> Lexicon | None:
    """The lexicon saved from the form, or None with the API's error on the form."""
    if not form.is_valid():
        return None
    try:
        return save_lexicon(lexicon, form.body())
    except ApiError as exc:
        form.add_api_error(exc)
        return None


def _entries(lexicon: Lexicon) -> str:
    count = len(lexicon.entries)
    text = f"{count} {'entry' if count == 1 else 'entries'}"
    return f"{text}, applied to every request" if lexicon.is_default else text


def _page(request, template: str, **context):
    """A lexicons page, with the entries the organization's lexicons hold against the plan's limit."""
    org = request.principal.organization
    return page(
        request,
        template,
        "lexicons",
        used=sum(len(entries) for entries in scoped(Lexicon, org).values_list("entries", flat=True)),
        limit=limits_for(org).max_lexicon_entries,
        can_manage=request.principal.is_admin,
        **context,
    )
