from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0015_organization_browser_origins"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="last_used_ip",
            field=models.GenericIPAddressField(blank=True, null=True),
        ),
    ]
