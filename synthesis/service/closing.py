"""An organization closed by its owner: its people, keys, voices (with their recordings' files),
lexicons, jobs (texts and stored audio), invitations, single sign-on and webhook delivery log go;
the usage ledger stays with the operator (billing records are kept, so the organization remains as
a closed, suspended row with its audit log). One with no usage at all is deleted outright.
Refused while a paid subscription runs or jobs are in flight."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from accounts import audit
from accounts.keys import revoke_key
from accounts.models import ApiKey, Invitation, Membership, Organization, SsoConnection
from billing.limits import subscription_for
from billing.models import BillingStatus, UsageEvent
from synthesis.models import Job, WebhookDelivery, WebhookEndpoint
from voices.models import Lexicon, Voice

logger = logging.getLogger(__name__)
CLOSED = "closed by its owner"


class ClosingRefused(Exception):
    """The organization cannot be closed yet; the message says what to do first."""


def close_organization(org: Organization, by) -> bool:
    """Closes `org`; True when nothing was left to keep and it was deleted outright."""
    sub = subscription_for(org)
    if sub.stripe_subscription_id and sub.billing_status in (BillingStatus.ACTIVE, BillingStatus.PAST_DUE):
        raise ClosingRefused("Cancel the subscription on the Billing page first (Manage billing).")
    running = Job.objects.filter(organization=org).exclude(status__in=Job.FINAL).count()
    if running:
        raise ClosingRefused(f"{running} job{'s' if running != 1 else ''} still running: wait or cancel them first.")
    with transaction.atomic():
        for key in ApiKey.objects.filter(organization=org, revoked_at__isnull=True):
            revoke_key(key, by)
        for job in Job.objects.filter(organization=org).iterator():
            if job.result:
                job.result.delete(save=False)
            job.delete()
        for model in (Voice, Lexicon, Invitation, SsoConnection, Membership, WebhookDelivery, WebhookEndpoint):
            model.objects.filter(organization=org).delete()
        if not UsageEvent.objects.filter(organization=org).exists():
            org.delete()
            deleted = True
        else:
            audit.record(org, "organization.closed", by, before={"name": org.name})
            Organization.objects.filter(pk=org.pk).update(suspended_at=timezone.now(), suspension_reason=CLOSED)
            deleted = False
    logger.info("organization closed", extra={"organization_id": org.pk, "deleted": deleted})
    return deleted
