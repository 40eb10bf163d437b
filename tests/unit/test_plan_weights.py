"""The seeded plans' price weight per model (billing.plans, billing.limits): each model's characters
billed at its weight, VoxCPM2 at twice ChatTTS's; and the data migration that gave VoxCPM2 its
weight, which changes a seeded plan only where an operator left its weights as they were seeded."""

from __future__ import annotations

import importlib
import math

import pytest
from django.apps import apps

from accounts.models import Organization
from billing.limits import limits_for
from billing.models import Plan
from billing.plans import MODEL_WEIGHTS

migration = importlib.import_module("billing.migrations.0010_voxcpm_weight")


@pytest.fixture
def org(db) -> Organization:
    return Organization.objects.create(name="Weights Unit", slug="weights-unit")


def test_the_seeded_plans_bill_each_model_at_its_weight_voxcpm_at_twice_chattts(org):
    limits = limits_for(org)  # the default plan, as seeded
    assert MODEL_WEIGHTS == {"chattts": 1.0, "kokoro": 0.5, "voxcpm": 2.0}
    for plan in Plan.objects.filter(slug__in=["free", "pro", "enterprise"]):
        assert plan.model_weights == MODEL_WEIGHTS, plan.slug
    assert limits.billed_characters("chattts", 21) == 21
    assert limits.billed_characters("kokoro", 21) == 11  # rounded up: never free
    assert limits.billed_characters("voxcpm", 21) == 42
    assert limits.billed_characters("voxcpm", 0) == 0
    assert limits.billed_characters("voxcpm", 1) == 2


def test_the_migration_gives_voxcpm_its_weight_only_where_the_seeded_weights_were_left_alone(org):
    before = {"chattts": 1, "kokoro": 0.5}  # as the database may give them back: 1, not 1.0
    Plan.objects.filter(slug="free").update(model_weights=before)
    Plan.objects.filter(slug="pro").update(model_weights={"chattts": 1.0, "kokoro": 0.4})  # changed
    Plan.objects.filter(slug="enterprise").update(model_weights={})  # emptied: every model 1
    own = Plan.objects.create(
        slug="own", name="Own", monthly_characters=1, requests_per_minute=1, concurrent_jobs=1, max_input_chars=1
    )
    Plan.objects.filter(pk=own.pk).update(model_weights=before)  # not a seeded plan: the operator's own

    migration.voxcpm_weight(apps, None)
    weights = dict(Plan.objects.values_list("slug", "model_weights"))
    assert weights["free"] == {"chattts": 1.0, "kokoro": 0.5, "voxcpm": 2.0}
    assert weights["pro"] == {"chattts": 1.0, "kokoro": 0.4}
    assert weights["enterprise"] == {} and weights["own"] == before
    assert limits_for(org).billed_characters("voxcpm", 10) == 20  # the default plan is free

    migration.as_before(apps, None)  # reversed: VoxCPM2 back to 1 where this migration set it
    weights = dict(Plan.objects.values_list("slug", "model_weights"))
    assert weights["free"] == {"chattts": 1.0, "kokoro": 0.5}
    assert weights["pro"] == {"chattts": 1.0, "kokoro": 0.4} and weights["enterprise"] == {}
    assert limits_for(org).billed_characters("voxcpm", 10) == math.ceil(10 * 1)
