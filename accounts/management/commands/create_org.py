"""`manage.py create_org NAME`: make an organization and print a new API key for it (shown once)."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.utils.text import slugify

from accounts.models import Organization


class Command(BaseCommand):
    help = "Create an organization (or reuse one by slug) and print a new API key for it."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--key-name", default="default")
        parser.add_argument("--quiet", action="store_true", help="print only the key")
        parser.add_argument(
            "--kind", choices=["admin", "standard"], default="admin", help="admin keys can also manage keys"
        )

    def handle(self, *args, name: str, key_name: str, quiet: bool, kind: str, **options):
        org, _ = Organization.objects.get_or_create(slug=slugify(name)[:100], defaults={"name": name})
        _, raw = org.create_api_key(key_name, kind=kind)
        if quiet:
            self.stdout.write(raw)
        else:
            self.stdout.write(f"Organization: {org.name} (id {org.pk})\nAPI key ({kind}, shown once): {raw}")
