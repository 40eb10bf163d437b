"""Voices and lexicons moved to the `voices` app. Their tables stay as they are (the models name
them with db_table); this forgets them in synthesis's state only."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('synthesis', '0008_voice_recordings'),
        ('voices', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name='voice', name='organization'),
                migrations.DeleteModel(name='Lexicon'),
                migrations.DeleteModel(name='Voice'),
            ],
            database_operations=[],
        ),
    ]
