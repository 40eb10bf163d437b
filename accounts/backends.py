"""Signing in by e-mail address, in any case. Addresses are stored lower case (sign-up, invitations);
the user types what their password manager saved, e.g. `Dana.Dev@Example.com`. Accounts made before
that rule (or by `createsuperuser`) may hold another case: the lookup ignores case for them too.
An account's username is its address, except staff made by `createsuperuser`, who have a username
of their own: their address signs them in as well (the form asks for the e-mail), as long as one
account alone has it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend


def account_named(typed: str):
    """The account `typed` names: by its username, else by its e-mail address if one account alone has it."""
    users = get_user_model()._default_manager
    typed = typed.strip()
    found = users.filter(username__iexact=typed).order_by("pk").first()
    if found is not None or "@" not in typed:
        return found
    same = list(users.filter(email__iexact=typed).order_by("pk")[:2])
    return same[0] if len(same) == 1 else None


class CaseInsensitiveEmailBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is not None:
            user = account_named(username)
            if user is not None:
                username = user.get_username()
        return super().authenticate(request, username=username, password=password, **kwargs)
