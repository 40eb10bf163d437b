"""Signing in by e-mail address, in any case. Addresses are stored lower case (sign-up, invitations);
the user types what their password manager saved, e.g. `Dana.Dev@Example.com`. Accounts made before
that rule (or by `createsuperuser`) may hold another case: the lookup ignores case for them too."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend


class CaseInsensitiveEmailBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is not None:
            model = get_user_model()
            user = model._default_manager.filter(username__iexact=username.strip()).order_by("pk").first()
            if user is not None:
                username = user.get_username()
        return super().authenticate(request, username=username, password=password, **kwargs)
