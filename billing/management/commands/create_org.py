"""`manage.py create_org NAME`: make an organization and print a new API key for it (shown once)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from accounts.actions import create_organization
from accounts.models import Organization
from billing.limits import subscription_for
from billing.models import Plan


class Command(BaseCommand):
    help = "Create an organization (or reuse one by slug) and print a new API key for it."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--key-name", default="default")
        parser.add_argument("--quiet", action="store_true", help="print only the key")
        parser.add_argument("--plan", help="plan slug (default: the default plan)")
        parser.add_argument(
            "--limit",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="override a plan limit, e.g. requests_per_minute=100000 (repeatable)",
        )
        parser.add_argument(
            "--kind", choices=["admin", "standard"], default="admin", help="admin keys can also manage keys"
        )

    def handle(
        self, *args, name: str, key_name: str, quiet: bool, kind: str, plan: str | None, limit: list[str], **options
    ):
        org = Organization.objects.filter(slug=slugify(name)[:90]).first() or create_organization(name)
        if plan:
            try:
                chosen = Plan.objects.get(slug=plan)
            except Plan.DoesNotExist as exc:
                slugs = ", ".join(Plan.objects.values_list("slug", flat=True))
                raise CommandError(f"Unknown plan {plan!r}; plans: {slugs}") from exc
            sub = subscription_for(org)
            sub.plan = chosen
            sub.save()
        if limit:
            sub = subscription_for(org)
            for item in limit:
                field, _, value = item.partition("=")
                if field not in ("monthly_characters", "requests_per_minute", "concurrent_jobs", "max_input_chars"):
                    raise CommandError(f"Unknown limit {field!r}")
                setattr(sub, field, int(value))
            sub.save()
        _, raw = org.create_api_key(key_name, kind=kind)
        if quiet:
            self.stdout.write(raw)
        else:
            self.stdout.write(f"Organization: {org.name} (id {org.pk})\nAPI key ({kind}, shown once): {raw}")
