from django.db import migrations


def seed(apps, schema_editor):
    from billing.plans import ensure_plans

    ensure_plans(apps.get_model("billing", "Plan"))


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
