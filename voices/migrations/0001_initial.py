"""Voices and lexicons, moved here from the synthesis app: their tables exist already (made by
synthesis 0006-0008), so this creates them in the state only."""

import django.db.models.deletion
import django.utils.timezone
import voices.models
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('accounts', '0005_webhook_secret_rotation'),
        ('synthesis', '0008_voice_recordings'),
    ]

    operations = [migrations.SeparateDatabaseAndState(database_operations=[], state_operations=[
        migrations.CreateModel(
            name='Lexicon',
            fields=[
                ('id', models.CharField(default=voices.models.new_lexicon_id, editable=False, max_length=32, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=100)),
                ('entries', models.JSONField(blank=True, default=list)),
                ('is_default', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='lexicons', to='accounts.organization')),
            ],
            options={
                'db_table': 'synthesis_lexicon',
                'ordering': ['created_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('organization', 'name'), name='one_lexicon_per_name')],
            },
        ),
        migrations.CreateModel(
            name='Voice',
            fields=[
                ('id', models.CharField(default=voices.models.new_voice_id, editable=False, max_length=32, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=64)),
                ('description', models.CharField(blank=True, max_length=300)),
                ('source', models.CharField(choices=[('seed', 'Seed'), ('embedding', 'Embedding'), ('recording', 'Recording')], max_length=16)),
                ('seed', models.PositiveIntegerField(blank=True, null=True)),
                ('speaker', models.TextField(blank=True)),
                ('sample', models.TextField(blank=True)),
                ('transcript', models.TextField(blank=True)),
                ('sample_text', models.TextField(blank=True)),
                ('upload', models.FileField(blank=True, upload_to='voices/')),
                ('status', models.CharField(choices=[('ready', 'Ready'), ('processing', 'Processing'), ('failed', 'Failed')], default='ready', max_length=16)),
                ('error', models.CharField(blank=True, max_length=300)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='voices', to='accounts.organization')),
            ],
            options={
                'db_table': 'synthesis_voice',
                'ordering': ['created_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('organization', 'name'), name='one_voice_per_name')],
            },
        ),
    ])]
