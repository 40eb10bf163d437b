from django.db import migrations

from billing.plans import replace_model_weights

# The seeded plans' weights before VoxCPM2 had its own (it billed 1, as a model not named), and
# after (billing.plans.MODEL_WEIGHTS says why 2). Written here: this migration's change, whatever
# the seeded weights become later.
BEFORE = {"chattts": 1.0, "kokoro": 0.5}
AFTER = {"chattts": 1.0, "kokoro": 0.5, "voxcpm": 2.0}


def voxcpm_weight(apps, schema_editor):
    """VoxCPM2 at its weight in the seeded plans whose weights no operator has changed."""
    replace_model_weights(apps.get_model("billing", "Plan"), BEFORE, AFTER)


def as_before(apps, schema_editor):
    replace_model_weights(apps.get_model("billing", "Plan"), AFTER, BEFORE)


class Migration(migrations.Migration):
    dependencies = [("billing", "0009_clone_limits_and_consent")]
    operations = [migrations.RunPython(voxcpm_weight, as_before)]
