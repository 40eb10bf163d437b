"""/v1/lexicons: an organization's pronunciation lexicons (create, list, read, change, delete), and
`matcher_for`, which compiles the lexicons a request names (and the organization's defaults) into
the `voices.lexicon.Matcher` it applies. Any key of the organization may manage them."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from django.db import IntegrityError, transaction
from django.db.models import Q
from drf_spectacular.utils import extend_schema, extend_schema_serializer, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.response import Response

from accounts.models import Organization
from accounts.tenancy import TenantScopedViewSet, scoped
from billing.limits import limits_for
from tts_saas.errors import ApiError, error_responses, validation_error
from tts_saas.serializers import StrictSerializer, refuse_any_body
from voices.lexicon import Entry, Matcher, merged, problem
from voices.models import Lexicon

MAX_LEXICONS = 100  # per organization
MAX_PER_REQUEST = 8  # lexicons one request may name
MAX_ENTRIES = 20_000  # in one lexicon, whatever the plan: a body's list is refused before it is read
LEXICON_ID = re.compile(r"lex_[0-9a-f]{16}")


def entries_of(lexicon: Lexicon) -> list[Entry]:
    return [
        Entry(e["text"], e.get("alias", ""), bool(e.get("case_sensitive", False)), e.get("phonemes", ""))
        for e in lexicon.entries
    ]


MATCHERS_KEPT = 64
_matchers: OrderedDict[tuple, Matcher] = OrderedDict()
_matchers_lock = threading.Lock()


def matcher_for(organization, ids: list[str], phonemes: bool = False, defaults: bool = True) -> Matcher:
    """The entries a request applies, compiled: its lexicons in the order named, then (unless
    `defaults` is off) the organization's default ones (oldest first); the first entry for a text
    wins. An id not of this organization is refused (400), whether it exists elsewhere or not. Kept per set of lexicon
    versions (a lexicon's `updated_at` changes with it): a request does not compile thousands of
    entries again. `phonemes`: the engine reads phoneme links (entries' `phonemes`)."""
    lexicons = _lexicons_for(organization, ids, defaults)
    key = (phonemes, *((lexicon.id, lexicon.updated_at) for lexicon in lexicons))
    with _matchers_lock:
        matcher = _matchers.pop(key, None)
    if matcher is None:
        matcher = Matcher(merged(entries_of(lexicon) for lexicon in lexicons), phonemes)
    with _matchers_lock:
        _matchers[key] = matcher
        while len(_matchers) > MATCHERS_KEPT:
            _matchers.popitem(last=False)
    return matcher


def _lexicons_for(organization, ids: list[str], defaults: bool = True) -> list[Lexicon]:
    wanted = Q(pk__in=ids) | Q(is_default=True) if defaults else Q(pk__in=ids)
    found = {lexicon.id: lexicon for lexicon in scoped(Lexicon, organization).filter(wanted).order_by("created_at")}
    for lexicon_id in ids:
        if lexicon_id not in found:
            raise ApiError(400, f"No lexicon '{lexicon_id}' in this organization.", "invalid_value", "lexicons")
    named = [found[i] for i in dict.fromkeys(ids)]
    rest = [lexicon for lexicon in found.values() if lexicon.is_default and lexicon.id not in ids]
    return named + rest


class LexiconEntrySerializer(StrictSerializer):
    text = serializers.CharField(max_length=100, trim_whitespace=False, help_text="The word or phrase, whole words.")
    alias = serializers.CharField(
        max_length=200,
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        help_text="What is read instead.",
    )
    phonemes = serializers.CharField(
        max_length=200,
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        help_text="How it is said, in the phonemes of models that read them (Kokoro: misaki's notation, e.g. "
        "kˈOkəɹO); other models read the alias.",
    )
    case_sensitive = serializers.BooleanField(default=False, help_text="false: matches in any case.")

    def validate(self, attrs):
        if "text" not in attrs:  # (a PATCH skips required)
            raise serializers.ValidationError({"text": ["This field is required."]}, code="required")
        if not attrs.get("alias") and not attrs.get("phonemes"):
            message = "Give an alias (what is read instead), phonemes (Kokoro), or both."
            raise serializers.ValidationError({"alias": [message]}, code="required")
        reason = problem(attrs["text"], attrs.get("alias", ""), attrs.get("phonemes", ""))
        if reason:
            raise serializers.ValidationError(reason)
        return attrs


class LexiconWriteSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    entries = LexiconEntrySerializer(
        many=True,
        required=False,
        max_length=MAX_ENTRIES,  # type: ignore[call-arg]  # ListSerializer's, not in the stubs
        help_text=f"At most {MAX_ENTRIES:,} entries a lexicon (and the plan's limit on entries in all).",
    )
    is_default = serializers.BooleanField(
        required=False, help_text="Applied to every request of the organization, after the lexicons it names."
    )

    def validate_entries(self, entries: list[dict]) -> list[dict]:
        # (In a PATCH the nested defaults are not filled in: case_sensitive may be missing.)
        entries = [
            {
                **entry,
                "alias": entry.get("alias", ""),
                "phonemes": entry.get("phonemes", ""),
                "case_sensitive": entry.get("case_sensitive", False),
            }
            for entry in entries
        ]
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            key = Entry(entry["text"], case_sensitive=entry["case_sensitive"]).key()
            if key in seen:
                raise serializers.ValidationError(f"entries[{i}]: '{entry['text']}' repeats entries[{seen[key]}].")
            seen[key] = i
        return entries


class LexiconSerializer(serializers.ModelSerializer):
    object = serializers.SerializerMethodField()
    entries = LexiconEntrySerializer(many=True)

    class Meta:
        model = Lexicon
        fields = ["id", "object", "name", "is_default", "entries", "created_at", "updated_at"]

    def get_object(self, lexicon) -> str:
        return "lexicon"


@extend_schema_serializer(many=False)  # the whole body, though the action is a list
class LexiconListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    data = LexiconSerializer(many=True)  # type: ignore[assignment]  # the response field, not Serializer.data


class DeletedSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    deleted = serializers.BooleanField()


NO_LEXICON = {404: "No lexicon with that id in this organization."}
WRITE_ERRORS = {
    400: "The request body is not valid.",
    403: "The plan's limit on lexicon entries (or on lexicons) is reached.",
    409: "Another lexicon of the organization has that name.",
}


@extend_schema_view(
    list=extend_schema(responses={200: LexiconListSerializer}),
    create=extend_schema(
        request=LexiconWriteSerializer, responses={201: LexiconSerializer, **error_responses(WRITE_ERRORS)}
    ),
    retrieve=extend_schema(responses={200: LexiconSerializer, **error_responses(NO_LEXICON)}),
    partial_update=extend_schema(
        request=LexiconWriteSerializer(partial=True),
        responses={200: LexiconSerializer, **error_responses({**WRITE_ERRORS, **NO_LEXICON})},
    ),
    destroy=extend_schema(responses={200: DeletedSerializer, **error_responses(NO_LEXICON)}),
)
class LexiconViewSet(mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Pronunciation lexicons: `text → alias` entries, used by requests that name them in
    `lexicons` and by every request when `is_default`."""

    model = Lexicon
    serializer_class = LexiconSerializer
    lookup_url_kwarg = "lexicon_id"

    def get_object(self) -> Lexicon:
        lexicon_id = self.kwargs.get(self.lookup_url_kwarg, "")
        lexicon = self.get_queryset().filter(pk=lexicon_id).first() if LEXICON_ID.fullmatch(lexicon_id) else None
        if lexicon is None:
            raise ApiError(404, f"No lexicon '{lexicon_id[:40]}' in this organization.", "not_found")
        return lexicon

    def list(self, request):
        return Response({"object": "list", "data": LexiconSerializer(self.get_queryset(), many=True).data})

    def create(self, request):
        return self._save(Lexicon(organization=request.user.organization), request.data, partial=False)

    def partial_update(self, request, lexicon_id=None):
        return self._save(self.get_object(), request.data, partial=True)

    def destroy(self, request, lexicon_id=None):
        refuse_any_body(request)
        lexicon = self.get_object()
        lexicon.delete()
        return Response({"id": lexicon_id, "object": "lexicon", "deleted": True})

    def _save(self, lexicon: Lexicon, body, partial: bool) -> Response:
        creating = lexicon._state.adding
        save_lexicon(lexicon, body, partial)
        code = status.HTTP_201_CREATED if creating else status.HTTP_200_OK
        return Response(LexiconSerializer(lexicon).data, status=code)


def save_lexicon(lexicon: Lexicon, body, partial: bool = False) -> Lexicon:
    """Create or change `lexicon` from a request body (the API's and the dashboard's): validated,
    within the plan's entry limit, its name unique in the organization; ApiError otherwise."""
    incoming = LexiconWriteSerializer(data=body, partial=partial)
    if not incoming.is_valid():
        raise validation_error(incoming.errors)
    data = incoming.validated_data
    org = lexicon.organization
    creating = lexicon._state.adding
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=org.pk).first()  # one change at a time
        others = list(scoped(Lexicon, org).exclude(pk=lexicon.pk))
        if creating and len(others) >= MAX_LEXICONS:
            raise ApiError(403, f"An organization keeps at most {MAX_LEXICONS} lexicons.", "plan_limit_reached")
        if "entries" in data:
            limit = limits_for(org).max_lexicon_entries
            total = sum(len(other.entries) for other in others) + len(data["entries"])
            if total > limit:
                raise ApiError(
                    403,
                    f"Your plan allows {limit} lexicon entries in all; this would make {total}.",
                    "plan_limit_reached",
                    "entries",
                )
            lexicon.entries = [dict(entry) for entry in data["entries"]]
        for field in ("name", "is_default"):
            if field in data:
                setattr(lexicon, field, data[field])
        try:
            with transaction.atomic():
                lexicon.save()
        except IntegrityError:
            raise ApiError(409, f"A lexicon named '{lexicon.name}' exists already.", "name_taken", "name") from None
    return lexicon
