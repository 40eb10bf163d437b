"""`manage.py close_org SLUG`: close an organization as its owner would from its Organization page
(`synthesis.service.closing.close_organization`: keys revoked, voices, lexicons, jobs and their
audio, invitations, single sign-on and webhooks deleted; the usage ledger and the audit log kept
with a closed, suspended row, or the organization deleted outright when it has no usage). The
admin console deletes no organization: Django's delete would skip all that."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from accounts.models import Organization
from synthesis.service.closing import ClosingRefused, close_organization


class Command(BaseCommand):
    help = "Close an organization as its owner would (the ledger and audit log are kept)."

    def add_arguments(self, parser):
        parser.add_argument("slug")

    def handle(self, *args, slug: str, **options):
        org = Organization.objects.filter(slug=slug).first()
        if org is None:
            raise CommandError(f"No organization {slug!r}.")
        try:
            deleted = close_organization(org, None)
        except ClosingRefused as exc:
            raise CommandError(str(exc)) from None
        said = "deleted (it had no usage)" if deleted else "closed (its ledger and audit log are kept)"
        self.stdout.write(f"Organization {slug} {said}.")
