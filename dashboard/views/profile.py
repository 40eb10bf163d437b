"""Your account (any signed-in user, with or without an organization): e-mail, password, second
factors, signed-in sessions (allauth's list: sign out the others), and deleting the account, which
is refused to the last owner of an organization (saying which, and the way out)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from accounts import account as accounts_of_people

from ..access import current_membership


class DeleteAccountForm(forms.Form):
    password = forms.CharField(
        label="Your password", widget=forms.PasswordInput(attrs={"autocomplete": "current-password"})
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        if not user.has_usable_password():  # signed in by single sign-on only
            del self.fields["password"]

    def clean_password(self):
        if not self.user.check_password(self.cleaned_data["password"]):
            raise forms.ValidationError("That is not your password.")
        return self.cleaned_data["password"]


@login_required
def account_page(request):
    current, memberships = current_membership(request)
    blocking = accounts_of_people.last_owner_of(request.user)
    form = DeleteAccountForm(request.POST or None, user=request.user)
    if request.method == "POST" and not blocking and form.is_valid():
        email = request.user.email
        accounts_of_people.delete_account(request.user)
        logout(request)
        messages.info(request, f"The account {email} is deleted.")
        return redirect("login")
    context = {"memberships": memberships, "blocking": blocking, "form": form}
    if current is not None:
        context.update(current_org=current.organization, membership=current)
    return render(request, "dashboard/account.html", context)
