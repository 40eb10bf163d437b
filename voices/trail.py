"""Voices and lexicons in the audit log: made, changed (lexicons) and deleted, by whoever acts in
the request (the API's key, the dashboard's member), through every path (API, dashboard, admin)."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from accounts import audit
from accounts.models import Organization

from .models import Lexicon, Voice


@receiver(post_save, sender=Voice)
def _voice_saved(sender, instance: Voice, created: bool, **kwargs) -> None:
    if created:  # later saves are the encoder's progress, not a change anyone made
        after = {"name": instance.name, "model": instance.model, "source": instance.source}
        audit.record(instance.organization, "voice.created", target=f"voice:{instance.id}", after=after)


def _cascaded(kwargs) -> bool:
    """Deleted with its organization: nothing left to record it in."""
    return isinstance(kwargs.get("origin"), Organization)


@receiver(post_delete, sender=Voice)
def _voice_deleted(sender, instance: Voice, **kwargs) -> None:
    if not _cascaded(kwargs):
        audit.record(
            instance.organization, "voice.deleted", target=f"voice:{instance.id}", before={"name": instance.name}
        )


@receiver(post_save, sender=Lexicon)
def _lexicon_saved(sender, instance: Lexicon, created: bool, **kwargs) -> None:
    action = "lexicon.created" if created else "lexicon.updated"
    after = {"name": instance.name, "entries": len(instance.entries or [])}
    audit.record(instance.organization, action, target=f"lexicon:{instance.id}", after=after)


@receiver(post_delete, sender=Lexicon)
def _lexicon_deleted(sender, instance: Lexicon, **kwargs) -> None:
    if not _cascaded(kwargs):
        audit.record(
            instance.organization, "lexicon.deleted", target=f"lexicon:{instance.id}", before={"name": instance.name}
        )
