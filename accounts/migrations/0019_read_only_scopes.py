"""Areas whose routes only read (usage, billing, audit) have only a `read` level: keys that listed
`usage:write`, `billing:write` or `audit:write` list what those allowed, `…:read`."""

from django.db import migrations

READ_ONLY = ("usage", "billing", "audit")


def named_by_what_they_allow(apps, schema_editor):
    ApiKey = apps.get_model("accounts", "ApiKey")
    for key in ApiKey.objects.exclude(scopes=[]).iterator():
        scopes = key.scopes if isinstance(key.scopes, list) else []
        renamed = sorted({f"{s.partition(':')[0]}:read" if s.partition(":")[0] in READ_ONLY else s for s in scopes})
        if renamed != sorted(scopes):
            key.scopes = renamed
            key.save(update_fields=["scopes"])


class Migration(migrations.Migration):
    dependencies = [("accounts", "0018_verbose_names")]

    operations = [migrations.RunPython(named_by_what_they_allow, migrations.RunPython.noop)]
