"""`manage.py create_org NAME`: make an organization and print a new API key for it (shown once);
with `--owner EMAIL`, also its owner's dashboard sign-in (./scripts/run's demo: its calls show on a
dashboard someone can sign in to); with `--key-file PATH`, the key is kept there and printed again by
the next run while it is valid, so restarts make no second key (nor sign the owner out)."""

from __future__ import annotations

import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from accounts.actions import create_organization, create_user
from accounts.models import KEY_SCHEME, ApiKey, Membership, Organization, hash_key
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
        parser.add_argument("--owner", metavar="EMAIL", help="also an owner who signs in to the dashboard")
        parser.add_argument(
            "--owner-password-file",
            metavar="PATH",
            help="the owner's password: read from PATH, or made and written there (the same every run)",
        )
        parser.add_argument(
            "--key-file",
            metavar="PATH",
            help="the key: printed again from PATH while it is usable, else a new one made and written there",
        )

    def kept_key(self, org: Organization, path: Path | None) -> str | None:
        """The key written at `path` by an earlier run, if it is still one of `org`'s usable keys."""
        raw = path.read_text().strip() if path is not None and path.exists() else ""
        scheme, _, rest = raw.partition("_")
        key = ApiKey.objects.filter(organization=org, prefix=rest.partition("_")[0]).first()
        if scheme != KEY_SCHEME or key is None or not key.is_usable() or key.hashed_key != hash_key(raw):
            return None
        return raw

    def owner_sign_in(self, org: Organization, email: str, password_file: str | None) -> str:
        """Makes `email` an owner of `org` (the account too, if new) and says how to sign in."""
        email = email.lower()
        path = Path(password_file) if password_file else None
        password = path.read_text().strip() if path is not None and path.exists() else secrets.token_urlsafe(12)
        user = get_user_model().objects.filter(username__iexact=email).first()
        if user is None:
            user = create_user(email, password)
        elif path is not None:
            if not user.check_password(password):  # the file's; set only if it differs (a new hash signs sessions out)
                user.set_password(password)
                user.save(update_fields=["password"])
        else:
            password = "(unchanged)"
        if path is not None and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(password + "\n")
        Membership.objects.get_or_create(user=user, organization=org, defaults={"role": Membership.Role.OWNER})
        return f"Dashboard sign-in (owner of {org.name}): {email} / {password}"

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
        key_file = Path(options["key_file"]) if options.get("key_file") else None
        raw = self.kept_key(org, key_file)
        reused = raw is not None
        if raw is None:
            _, raw = org.create_api_key(key_name, kind=kind)
            if key_file is not None:
                key_file.parent.mkdir(parents=True, exist_ok=True)
                key_file.touch(mode=0o600)
                key_file.write_text(raw + "\n")
        if quiet:
            self.stdout.write(raw)
            return
        shown = "shown once" if key_file is None else f"{'the one' if reused else 'new,'} kept in {key_file}"
        self.stdout.write(f"Organization: {org.name} (id {org.pk})\nAPI key ({kind}, {shown}): {raw}")
        if options.get("owner"):
            self.stdout.write(self.owner_sign_in(org, options["owner"], options.get("owner_password_file")))
