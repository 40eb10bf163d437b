"""The Settings page's forms: the organization's name, its default model and voice (each model's
voices only), its voice aliases, and its IP allowlist for API calls."""

from __future__ import annotations

from django import forms

from billing import offer
from billing.limits import limits_for
from synthesis.api.aliases import openai_names
from voices.catalog import builtin_listing, own_voices, stored_aliases
from voices.models import Voice

from .keyforms import networks_field


class RenameForm(forms.Form):
    name = forms.CharField(max_length=200, label="Name")


class DefaultsForm(forms.Form):
    """The organization's default model and voice (`synthesis.api.defaults`): the models the plan
    allows, the voices of each (built in, and the organization's own that are ready), grouped by
    model; the page shows the chosen model's group only, and a voice of another model is a form error."""

    model = forms.ChoiceField(required=False, label="Default model")
    voice = forms.ChoiceField(required=False, label="Default voice")

    def __init__(self, *args, org, **kwargs):
        super().__init__(*args, **kwargs)
        limits = limits_for(org)
        self.specs = offer.allowed_specs(limits)
        self.deployment = offer.default_spec()
        self.fields["model"].choices = [("", f"The service's default ({self.deployment.title})")] + [
            (spec.name, spec.title) for spec in self.specs
        ]
        ready = own_voices(org).filter(status=Voice.Status.READY).only("id", "name", "model")
        self.voices_of = {
            spec.name: [(v["id"], v["name"]) for v in builtin_listing(spec, limits.allowed_voices)]
            + [(v.id, f"{v.name} (yours)") for v in ready if v.model == spec.name]
            for spec in self.specs
        }
        self.fields["voice"].choices = [("", "alloy (OpenAI's default name)")] + [
            (spec.title, self.voices_of[spec.name]) for spec in self.specs
        ]
        self.fields[
            "model"
        ].help_text = "What requests that name no model, or OpenAI's names (tts-1, gpt-4o-mini-tts), speak with."
        self.fields["voice"].help_text = "The voice of requests to the default model that name none; one of its voices."

    def model_titles(self) -> dict[str, str]:
        """Each choice of the model field → the title of the model it means (the page's script
        shows that model's voices only)."""
        return {"": self.deployment.title, **{spec.name: spec.title for spec in self.specs}}

    def model_label(self, model: str) -> str:
        """A stored default model in words, the service's default named."""
        return dict(self.fields["model"].choices).get(model, model)

    def clean(self):
        data = super().clean()
        model, voice = data.get("model") or self.deployment.name, data.get("voice")
        if voice and model in self.voices_of and voice not in dict(self.voices_of[model]):
            names = dict(v for choices in self.voices_of.values() for v in choices)
            owner = next(s.title for s in self.specs if voice in dict(self.voices_of[s.name]))
            title = next(s.title for s in self.specs if s.name == model) if data.get("model") else self.deployment.title
            self.add_error(
                "voice",
                f"{names.get(voice, voice)} is a {owner} voice; {title} cannot speak with it. "
                f"Choose one of {title}'s voices, or none for its default.",
            )
        return data


class AliasesForm(forms.Form):
    """The organization's voice aliases (`synthesis.api.aliases`): for each of OpenAI's voice names,
    built in, or a voice of any model the plan allows (built in, or the organization's own that are
    ready), as "model:voice"."""

    def __init__(self, *args, org, **kwargs):
        super().__init__(*args, **kwargs)
        limits = limits_for(org)
        specs = offer.allowed_specs(limits)
        ready = own_voices(org).filter(status=Voice.Status.READY).only("id", "name", "model")
        groups = [
            (
                spec.title,
                [(f"{spec.name}:{v['id']}", v["name"]) for v in builtin_listing(spec, limits.allowed_voices)]
                + [(f"{spec.name}:{v.id}", f"{v.name} (yours)") for v in ready if v.model == spec.name],
            )
            for spec in specs
        ]
        self.names, stored = list(openai_names()), stored_aliases(org)
        for name in self.names:
            alias = stored.get(name)
            chosen = f"{alias['model']}:{alias['voice']}" if alias else ""
            self.fields[name] = forms.ChoiceField(
                required=False, label=name, choices=[("", "as built in")] + groups, initial=chosen
            )

    def aliases(self) -> dict:
        """The chosen aliases, {name: {"model", "voice"}}, for `aliases.check`."""
        chosen = {name: self.cleaned_data.get(name) for name in self.names}
        return {n: dict(zip(("model", "voice"), v.split(":", 1), strict=True)) for n, v in chosen.items() if v}


class IpAllowlistForm(forms.Form):
    allowed_ips = forms.CharField(
        required=False,
        label="Allowed IPs",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "203.0.113.0/24, 2001:db8::/32"}),
        help_text="API calls (REST and WebSocket) from other addresses are refused; empty: any address. "
        "The dashboard is not restricted by it.",
    )

    def clean_allowed_ips(self):
        return networks_field(self.cleaned_data["allowed_ips"])
