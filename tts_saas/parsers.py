"""Reading JSON request bodies: malformed JSON, JSON nested too deeply for the parser and bodies
that are not UTF-8 are a 400 in the API's error shape, never a 500."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from .errors import ApiError


def load_json(data: bytes | str) -> Any:
    try:
        return json.loads(data or b"")
    except RecursionError as exc:  # e.g. [[[[…]]]] thousands deep
        raise ApiError(400, "The request body is not valid JSON: it is nested too deeply.", "invalid_json") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc}", "invalid_json") from exc


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, with the failures above as ParseError (400) instead of a server error."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return load_json(stream.read())
        except ApiError as exc:
            raise ParseError(exc.message.removeprefix("The request body is not valid JSON: ")) from exc
