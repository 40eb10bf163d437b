from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0016_apikey_last_used_ip"),
    ]

    operations = [
        migrations.AddField(
            model_name="organization",
            name="voice_aliases",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
