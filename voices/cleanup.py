"""What goes with a deleted voice, whatever deleted it (the API, the dashboard, the admin, a closed
organization), once the deletion is committed: its kept upload, its recording if a worker has not
encoded it yet, and its place as the organization's default voice and in its voice aliases."""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from accounts.models import Organization
from tts_saas.redis import get_redis

from .models import Voice
from .recordings import RECORDING_KEY


@receiver(post_delete, sender=Voice)
def _voice_deleted(sender, instance: Voice, **kwargs) -> None:
    upload = instance.upload.name if instance.upload else ""

    def forget() -> None:
        if upload:
            instance.upload.storage.delete(upload)
        get_redis().delete(RECORDING_KEY.format(instance.id))
        # Requests that name no voice would otherwise be refused for a voice they never named.
        Organization.objects.filter(pk=instance.organization_id, default_voice=instance.id).update(default_voice="")
        # Its voice aliases too: OpenAI's name speaks as built in again (synthesis.api.aliases).
        with transaction.atomic():
            org = Organization.objects.select_for_update().filter(pk=instance.organization_id).first()
            aliases = org.voice_aliases if org is not None and isinstance(org.voice_aliases, dict) else {}
            kept = {n: a for n, a in aliases.items() if not (isinstance(a, dict) and a.get("voice") == instance.id)}
            if org is not None and len(kept) < len(aliases):
                org.voice_aliases = kept
                org.save(update_fields=["voice_aliases"])

    transaction.on_commit(forget)
