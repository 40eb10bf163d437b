"""A small in-process fake of Stripe's v1 HTTP API, for tests (Stripe's servers cannot be reached from here).

`FakeStripe` is a real HTTP server on 127.0.0.1 (a random port). Product code talks to it through the real
`stripe` library, exactly as in production except for the base address::

    with FakeStripe() as fake:
        client = stripe.StripeClient("sk_test_x", base_addresses={"api": fake.url}, max_network_retries=0)
        customer = client.v1.customers.create(params={"email": "a@example.com"})

What it fakes (only this; anything else answers 404 "Unrecognized request URL"):

- customers (create, retrieve, update), checkout sessions (create, retrieve), billing portal sessions (create),
  products (create, retrieve, update), prices (list, create, update; lookup keys are unique and can be
  transferred), billing meters (list, create, retrieve, event summaries) and meter events (create, with
  identifier de-duplication), subscriptions (retrieve) and invoices (list, retrieve).
- the wire format: form-encoded bodies and query strings with nested keys (`line_items[0][price]`), JSON
  answers, list objects, Stripe's error bodies and status codes (which the library turns into its exception
  classes), `expand`, `limit`/`starting_after` on lists, and "Received unknown parameter" for parameters it
  does not model, so a typo in product code fails here as it would against Stripe.
- `Authorization: Bearer sk_...` (401 otherwise) and idempotency keys on POST: the same key again answers the
  stored response without doing the work again; the same key with other parameters or another path answers
  400 idempotency_error. Only successful answers are stored (Stripe stores nothing when a request fails
  validation). Keys never expire here (Stripe keeps them for 24 hours).
- failure injection (`fail_next`, `fail_after_next`, `delay_next`) for outages, lost answers and timeouts.
- changes that happen on Stripe's side without an API call from us (a customer pays in Checkout, a
  subscription goes past due, an invoice is paid): the test-side helpers `complete_checkout`,
  `set_subscription`, `cancel_subscription`, `create_invoice`, `set_invoice`; `event` builds the webhook
  event for such a change and the module-level `sign` its real `Stripe-Signature` header.

What it does not fake: payments, cards, taxes, proration, trials, invoices generated from usage, webhook
delivery (tests post the signed event themselves), pagination with `ending_before`, search, deletion,
connected accounts, the v2 API, rate limits and Stripe's asynchronous meter-event error reports (the fake
rejects a bad meter event synchronously with 400 instead). Ids are `prefix_N` counters, not random.

Deliberate deviation (asked for by the code that uses it): subscriptions carry `current_period_start/end` at
the top level as well as on their items. In the API version pinned here (2026-10-28.endive) Stripe returns
them only on the subscription items, so product code should read them from there. Invoices follow the current
API: the subscription of an invoice is at `parent.subscription_details.subscription` (no top-level
`subscription`).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import stripe

API_VERSION = "2026-10-28.endive"

DAY = 86_400
MAX_METER_EVENT_AGE_S = 35 * DAY  # Stripe rejects meter events older than 35 days ...
MAX_METER_EVENT_FUTURE_S = 5 * 60  # ... or more than 5 minutes in the future.


# --- the wire format ---------------------------------------------------------------------------------------

_KEY_RE = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])*)$")
_SEGMENT_RE = re.compile(r"\[([^\[\]]*)\]")


def decode_params(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Stripe's nested form encoding decoded into nested dicts and lists of strings:
    `[("line_items[0][price]", "p"), ("metadata[org]", "3")]` -> `{"line_items": [{"price": "p"}],
    "metadata": {"org": "3"}}`. `key[]` appends. A dict whose keys are all digits becomes a list (in the
    order of the indexes), except a `metadata` dict, whose keys are the caller's own."""
    root: dict[str, Any] = {}
    for key, value in pairs:
        m = _KEY_RE.match(key)
        parts = [m.group(1), *_SEGMENT_RE.findall(m.group(2))] if m else [key]
        node = root
        for part in parts[:-1]:
            part = part or str(len(node))
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1] or str(len(node))] = value
    return _listify(root)


def _listify(node: Any, is_metadata: bool = False) -> Any:
    if not isinstance(node, dict):
        return node
    out = {k: _listify(v, is_metadata=(k == "metadata")) for k, v in node.items()}
    if out and not is_metadata and all(k.isdigit() for k in out):
        return [out[k] for k in sorted(out, key=int)]
    return out


class StripeFakeError(Exception):
    """An error answer: HTTP `status` with Stripe's error body (the library picks its exception class from
    the status and `type`: 400/404 -> InvalidRequestError, 401 -> AuthenticationError, 5xx -> APIError)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {"error": {"type": type, "message": message}}
        if code:
            self.body["error"]["code"] = code
        if param:
            self.body["error"]["param"] = param


def _bad(message: str, param: str | None = None, code: str = "parameter_invalid") -> StripeFakeError:
    return StripeFakeError(400, message, code=code, param=param)


def _missing(param: str) -> StripeFakeError:
    return StripeFakeError(400, f"Missing required param: {param}.", code="parameter_missing", param=param)


def _no_such(kind: str, obj_id: str, param: str = "id", status: int = 404) -> StripeFakeError:
    return StripeFakeError(status, f"No such {kind}: '{obj_id}'", code="resource_missing", param=param)


def _allow(params: dict[str, Any], *names: str) -> None:
    """Stripe rejects parameters it does not know; so does the fake for those it does not model."""
    for name in params:
        if name not in names and name != "expand":
            raise _bad(f"Received unknown parameter: {name} (not modelled by tests/fake_stripe.py)", name)


def _str(
    params: dict[str, Any],
    name: str,
    *,
    required: bool = False,
    choices: Iterable[str] = (),
    param: str | None = None,
) -> str | None:
    """A string parameter; an empty string (Stripe's way to unset a field) reads as None. `param` is the
    parameter's full name in errors when `params` is a nested hash."""
    param = param or name
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise _missing(param)
        return None
    if not isinstance(value, str):
        raise _bad(f"Invalid string: {param} must be a string", param)
    choices = tuple(choices)
    if choices and value not in choices:
        raise _bad(f"Invalid {param}: must be one of {', '.join(choices)}", param)
    return value


def _int(params: dict[str, Any], name: str, *, required: bool = False, param: str | None = None) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise _missing(param or name)
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad(f"Invalid integer: {value}", param or name) from None


def _bool(params: dict[str, Any], name: str) -> bool | None:
    value = params.get(name)
    if value is None:
        return None
    if value not in ("true", "false"):
        raise _bad(f"Invalid boolean: {value}", name)
    return value == "true"


def _decimal(value: Any, param: str) -> str:
    """A decimal amount as Stripe echoes it: a plain string without exponent or trailing zeros."""
    try:
        d = Decimal(value)
    except (TypeError, InvalidOperation):
        raise _bad(f"Invalid decimal: {value}", param) from None
    if not d.is_finite() or d < 0:
        raise _bad(f"Invalid decimal: {value}", param)
    text = format(d.normalize(), "f")
    return text


def _dict(params: dict[str, Any], name: str) -> dict[str, Any]:
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"Invalid object: {name} must be a hash", name)
    return value


def _merge_metadata(current: dict[str, str], value: Any) -> dict[str, str]:
    """Stripe's metadata update: keys are merged, `metadata[key]=""` removes a key, `metadata=""` clears all."""
    if value is None:
        return current
    if value == "":
        return {}
    if not isinstance(value, dict):
        raise _bad("Invalid object: metadata must be a hash", "metadata")
    merged = dict(current)
    for key, item in value.items():
        if len(key) > 40:
            raise _bad("Metadata keys can have up to 40 characters.", f"metadata[{key}]")
        if not isinstance(item, str):
            raise _bad("Metadata values must be strings.", f"metadata[{key}]")
        if len(item) > 500:
            raise _bad("Metadata values can have up to 500 characters.", f"metadata[{key}]")
        if item == "":
            merged.pop(key, None)
        else:
            merged[key] = item
    if len(merged) > 50:
        raise _bad("Metadata can have up to 50 keys.", "metadata")
    return merged


def sign(payload: bytes, secret: str, timestamp: int | None = None) -> str:
    """The `Stripe-Signature` header Stripe would send with `payload` for the endpoint secret `secret`:
    `t=<timestamp>,v1=<hex HMAC-SHA256 of "<timestamp>.<payload>">`, by the library's own helper."""
    return stripe.WebhookSignature.generate_signature_header(payload.decode("utf-8"), secret, timestamp=timestamp)


# --- the fake ------------------------------------------------------------------------------------------------


@dataclass
class Request:
    """One request as the fake received it. `params` are the decoded query string (GET) or form body
    (POST); header names are lower-case."""

    method: str
    path: str
    params: dict[str, Any]
    headers: dict[str, str] = field(repr=False)


@dataclass
class _Rule:
    method: str
    path_prefix: str
    times: int
    status: int = 500
    seconds: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and self.method == method and path.startswith(self.path_prefix)


@dataclass
class _Stored:
    """An idempotency key's first request and the answer to repeat."""

    method: str
    path: str
    params: dict[str, Any]
    status: int
    body: dict[str, Any]


class FakeStripe:
    """The fake server; see the module docstring. `api_key`, when given, is the only key accepted (any
    `sk_...` key otherwise). `clock` gives "now" in seconds (time.time by default)."""

    def __init__(self, api_key: str | None = None, clock: Callable[[], float] = time.time):
        self.api_key = api_key
        self.clock = clock
        # Handlers and test-side helpers all run under this lock, so each request is atomic. Re-entrant so
        # that a helper may call another.
        self._lock = threading.RLock()
        self._stop_event = threading.Event()

        self.requests: list[Request] = []
        # accepted: {event_name, customer, value, identifier, timestamp, payload}
        self.meter_events: list[dict[str, Any]] = []
        self.duplicate_meter_events = 0  # meter events ignored because their identifier was already recorded
        self.events: list[dict[str, Any]] = []  # made by event()

        self._objects: dict[str, dict[str, Any]] = {}  # every object by id, in creation order
        self._counters: dict[str, itertools.count] = {}
        self._idempotency: dict[str, _Stored] = {}
        self._rules: dict[str, list[_Rule]] = {"fail": [], "fail_after": [], "delay": []}
        self._price_tiers: dict[str, list[dict[str, Any]]] = {}  # returned only when expanded, as by Stripe
        self._session_line_items: dict[str, list[dict[str, Any]]] = {}
        self._session_subscription_metadata: dict[str, dict[str, str]] = {}
        self._session_anchor: dict[str, int | None] = {}  # subscription_data[billing_cycle_anchor]
        self._meter_event_answers: dict[str, dict[str, Any]] = {}  # identifier -> the first answer

        self._routes: list[tuple[str, re.Pattern[str], Callable[..., dict[str, Any]]]] = [
            (method, re.compile(f"^{pattern}$"), handler)
            for method, pattern, handler in [
                ("POST", "/v1/customers", self._create_customer),
                ("GET", "/v1/customers/(?P<id>[^/]+)", self._retrieve_customer),
                ("POST", "/v1/customers/(?P<id>[^/]+)", self._update_customer),
                ("POST", "/v1/checkout/sessions", self._create_checkout_session),
                ("GET", "/v1/checkout/sessions/(?P<id>[^/]+)", self._retrieve_checkout_session),
                ("POST", "/v1/billing_portal/sessions", self._create_portal_session),
                ("POST", "/v1/products", self._create_product),
                ("GET", "/v1/products/(?P<id>[^/]+)", self._retrieve_product),
                ("POST", "/v1/products/(?P<id>[^/]+)", self._update_product),
                ("GET", "/v1/prices", self._list_prices),
                ("POST", "/v1/prices", self._create_price),
                ("POST", "/v1/prices/(?P<id>[^/]+)", self._update_price),
                ("GET", "/v1/billing/meters", self._list_meters),
                ("POST", "/v1/billing/meters", self._create_meter),
                ("GET", "/v1/billing/meters/(?P<id>[^/]+)", self._retrieve_meter),
                ("GET", "/v1/billing/meters/(?P<id>[^/]+)/event_summaries", self._meter_event_summaries),
                ("POST", "/v1/billing/meter_events", self._create_meter_event),
                ("GET", "/v1/subscriptions", self._list_subscriptions),
                ("GET", "/v1/subscriptions/(?P<id>[^/]+)", self._retrieve_subscription),
                ("GET", "/v1/invoices", self._list_invoices),
                ("GET", "/v1/invoices/(?P<id>[^/]+)", self._retrieve_invoice),
            ]
        ]

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.fake = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-stripe", daemon=True
        )
        self._thread.start()

    # --- lifecycle ---

    def stop(self) -> None:
        """Stops serving (a delayed answer still pending is cut short). Idempotent."""
        if self._stop_event.is_set():
            return
        self._stop_event.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeStripe:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- inspection and failure injection ---

    def now(self) -> int:
        return int(self.clock())

    def calls(self, method: str, path_prefix: str = "/") -> list[Request]:
        """The recorded requests with this method whose path starts with `path_prefix`."""
        with self._lock:
            return [r for r in self.requests if r.method == method.upper() and r.path.startswith(path_prefix)]

    def get(self, obj_id: str) -> dict[str, Any]:
        """Any object by id, as the API would return it (KeyError if unknown)."""
        with self._lock:
            return self._render(self._objects[obj_id])

    def fail_next(self, method: str, path_prefix: str, times: int = 1, status: int = 500) -> None:
        """The next `times` matching requests answer `status` with an error body, without doing the work
        (as when Stripe or the network in front of it fails before the request is processed)."""
        with self._lock:
            self._rules["fail"].append(_Rule(method.upper(), path_prefix, times, status))

    def fail_after_next(self, method: str, path_prefix: str, times: int = 1, status: int = 500) -> None:
        """The next `times` matching requests are processed (and stored under their idempotency key) but
        answered with `status` and an error body, as when Stripe did the work but the answer was lost. A retry
        with the same idempotency key then gets the stored successful answer."""
        with self._lock:
            self._rules["fail_after"].append(_Rule(method.upper(), path_prefix, times, status))

    def delay_next(self, method: str, path_prefix: str, seconds: float, times: int = 1) -> None:
        """The next `times` matching requests are processed at once (and stored under their idempotency key),
        then answered only after `seconds`: a client with a shorter timeout gives up not knowing the outcome,
        as when Stripe is slow."""
        with self._lock:
            self._rules["delay"].append(_Rule(method.upper(), path_prefix, times, seconds=seconds))

    def _take_rule(self, kind: str, method: str, path: str) -> _Rule | None:
        for rule in self._rules[kind]:
            if rule.matches(method, path):
                rule.times -= 1
                return rule
        return None

    # --- request handling ---

    def _handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any, dict]:
        """One request -> (status, JSON body, extra response headers). Called by the HTTP handler's thread."""
        split = urlsplit(raw_path)
        path = split.path
        pairs = parse_qsl(split.query, keep_blank_values=True)
        if method == "POST":
            pairs += parse_qsl(body.decode("utf-8"), keep_blank_values=True)
        params = decode_params(pairs)
        response_headers: dict[str, str] = {}
        delay = 0.0
        with self._lock:
            self.requests.append(Request(method, path, params, dict(headers)))
            response_headers["Request-Id"] = f"req_{len(self.requests)}"
            try:
                self._authenticate(headers.get("authorization", ""))
                if rule := self._take_rule("fail", method, path):
                    raise _injected_error(rule.status)
                fail_after = self._take_rule("fail_after", method, path)
                if rule := self._take_rule("delay", method, path):
                    delay = rule.seconds
                key = headers.get("idempotency-key") if method == "POST" else None
                if key:
                    response_headers["Idempotency-Key"] = key
                if key and key in self._idempotency:
                    stored = self._idempotency[key]
                    if (stored.method, stored.path, stored.params) != (method, path, params):
                        raise StripeFakeError(
                            400,
                            "Keys for idempotent requests can only be used with the same parameters they were "
                            f"first used with. Try using a key other than '{key}' if you meant to execute a "
                            "different request.",
                            type="idempotency_error",
                        )
                    response_headers["Idempotent-Replayed"] = "true"
                    status, answer = stored.status, copy.deepcopy(stored.body)
                else:
                    status, answer = 200, self._dispatch(method, path, params)
                    if key:
                        self._idempotency[key] = _Stored(method, path, params, status, copy.deepcopy(answer))
                if fail_after:
                    raise _injected_error(fail_after.status)
            except StripeFakeError as e:
                status, answer = e.status, e.body
        if delay:
            self._stop_event.wait(delay)  # outside the lock: other requests go on meanwhile
        return status, answer, response_headers

    def _authenticate(self, authorization: str) -> None:
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer" or not key.startswith("sk_") or (self.api_key and key != self.api_key):
            shown = f"{key[:8]}..." if key else "(none)"
            raise StripeFakeError(401, f"Invalid API Key provided: {shown}")

    def _dispatch(self, method: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
        for route_method, pattern, handler in self._routes:
            if route_method == method and (m := pattern.match(path)):
                answer = handler(params, **m.groupdict())
                return self._expand(answer, params)
        raise StripeFakeError(
            404,
            f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs or we can help at "
            "https://support.stripe.com/.",
        )

    # --- ids, lists, rendering, expand ---

    def _new_id(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}_{next(counter)}"

    def _find(self, object_type: str, obj_id: Any, kind: str, param: str = "id", status: int = 404) -> dict:
        obj = self._objects.get(obj_id) if isinstance(obj_id, str) else None
        if obj is None or obj["object"] != object_type:
            raise _no_such(kind, str(obj_id), param=param, status=status)
        return obj

    def _all(self, object_type: str) -> list[dict[str, Any]]:
        return [o for o in self._objects.values() if o["object"] == object_type]

    def _render(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object as the API returns it: a copy, with what Stripe always embeds (a subscription item's price)."""
        out = copy.deepcopy(obj)
        if out["object"] == "subscription":
            for item in out["items"]["data"]:
                item["price"] = self._render(self._objects[item["price"]])
        return out

    def _list(self, url: str, objects: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        """A list object, newest first, with Stripe's `limit` (default 10, at most 100) and `starting_after`."""
        limit = _int(params, "limit")
        limit = 10 if limit is None else limit
        if not 1 <= limit <= 100:
            raise _bad("Invalid limit: must be between 1 and 100", "limit")
        items = list(reversed(objects))
        if after := _str(params, "starting_after"):
            ids = [o["id"] for o in items]
            if after not in ids:
                raise _no_such("object", after, param="starting_after", status=400)
            items = items[ids.index(after) + 1 :]
        page = [self._render(o) for o in items[:limit]]
        return {"object": "list", "data": page, "has_more": len(items) > limit, "url": url}

    def _expand(self, answer: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """Stripe's `expand[]`: dotted paths whose last part is an id to replace by its object (`product`,
        `data.product`, `items.data.price.product`), or a field Stripe sends only when asked (a price's
        `tiers`, a checkout session's `line_items`). Lists are walked through."""
        paths = params.get("expand") or []
        if not isinstance(paths, list):
            raise _bad("Invalid array: expand must be an array", "expand")
        for path in paths:
            self._expand_path(answer, path.split("."), path)
        return answer

    def _expand_path(self, node: Any, parts: list[str], path: str) -> None:
        if isinstance(node, list):
            for item in node:
                self._expand_path(item, parts, path)
            return
        if not isinstance(node, dict) or not parts:
            return
        head, rest = parts[0], parts[1:]
        if head not in node:
            if (node.get("object"), head) == ("price", "tiers"):
                node["tiers"] = copy.deepcopy(self._price_tiers.get(node["id"]))
            elif (node.get("object"), head) == ("checkout.session", "line_items"):
                node["line_items"] = self._line_items(node["id"])
            else:
                raise _bad(f"This property cannot be expanded ({path}).", "expand")
        elif isinstance(node[head], str) and node[head] in self._objects:
            node[head] = self._render(self._objects[node[head]])
        elif isinstance(node[head], str) and not rest:
            raise _bad(f"This property cannot be expanded ({path}).", "expand")
        self._expand_path(node[head], rest, path)

    def _line_items(self, session_id: str) -> dict[str, Any]:
        data = []
        for item in self._session_line_items[session_id]:
            price = self._render(self._objects[item["price"]])
            data.append({"id": item["id"], "object": "item", "price": price, "quantity": item["quantity"]})
        return {
            "object": "list",
            "data": data,
            "has_more": False,
            "url": f"/v1/checkout/sessions/{session_id}/line_items",
        }

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._objects[obj["id"]] = obj
        return self._render(obj)

    # --- customers ---

    def _create_customer(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "email", "name", "metadata", "description", "phone")
        customer = {
            "id": self._new_id("cus"),
            "object": "customer",
            "created": self.now(),
            "email": _str(params, "email"),
            "name": _str(params, "name"),
            "description": _str(params, "description"),
            "phone": _str(params, "phone"),
            "metadata": _merge_metadata({}, params.get("metadata")),
            "balance": 0,
            "currency": None,
            "delinquent": False,
            "livemode": False,
        }
        return self._store(customer)

    def _retrieve_customer(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params)
        return self._render(self._find("customer", id, "customer"))

    def _update_customer(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params, "email", "name", "metadata", "description", "phone")
        customer = self._find("customer", id, "customer")
        metadata = _merge_metadata(customer["metadata"], params.get("metadata"))  # validate before changing
        for name in ("email", "name", "description", "phone"):
            if name in params:
                customer[name] = _str(params, name)
        customer["metadata"] = metadata
        return self._render(customer)

    # --- checkout and the billing portal ---

    def _create_checkout_session(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(
            params,
            "mode",
            "customer",
            "customer_email",
            "client_reference_id",
            "line_items",
            "success_url",
            "cancel_url",
            "metadata",
            "subscription_data",
            "allow_promotion_codes",
            "billing_address_collection",
            "locale",
        )
        mode = _str(params, "mode", required=True, choices=("payment", "setup", "subscription"))
        customer = _str(params, "customer")
        if customer is not None:
            self._find("customer", customer, "customer", param="customer", status=400)
        if customer and params.get("customer_email"):
            raise _bad("You may only specify one of these parameters: customer, customer_email.", "customer_email")
        line_items = params.get("line_items") or []
        if not isinstance(line_items, list):
            raise _bad("Invalid array: line_items must be an array", "line_items")
        if mode != "setup" and not line_items:
            raise _missing("line_items")
        stored_items = []
        recurring = False
        for i, item in enumerate(line_items):
            if not isinstance(item, dict):
                raise _bad("Invalid object", f"line_items[{i}]")
            _allow_nested(item, f"line_items[{i}]", "price", "quantity")
            price = self._find("price", item.get("price"), "price", param=f"line_items[{i}][price]", status=400)
            if not price["active"]:
                raise _bad(
                    "The price specified is inactive. This field only accepts active prices.",
                    f"line_items[{i}][price]",
                )
            metered = (price["recurring"] or {}).get("usage_type") == "metered"
            quantity = _int(item, "quantity", param=f"line_items[{i}][quantity]")
            if metered and quantity is not None:
                raise _bad(
                    "Quantity should not be specified where usage_type is `metered`. Remove quantity from "
                    f"`line_items[{i}]`.",
                    f"line_items[{i}][quantity]",
                )
            if not metered and quantity is None:
                raise _bad(f"Quantity is required. Add `quantity` to `line_items[{i}]`.", f"line_items[{i}][quantity]")
            if quantity is not None and quantity < 1:
                raise _bad("Quantity must be at least 1.", f"line_items[{i}][quantity]")
            recurring = recurring or price["type"] == "recurring"
            stored_items.append({"id": self._new_id("li"), "price": price["id"], "quantity": quantity})
        if mode == "subscription" and not recurring:
            raise _bad("You must provide at least one recurring price in `subscription` mode.", "line_items")
        if mode == "payment" and recurring:
            raise _bad("You specified `payment` mode but passed a recurring price.", "line_items")
        subscription_data = _dict(params, "subscription_data")
        _allow_nested(
            subscription_data,
            "subscription_data",
            "metadata",
            "description",
            "billing_cycle_anchor",
            "proration_behavior",
        )
        anchor = _int(subscription_data, "billing_cycle_anchor", param="subscription_data[billing_cycle_anchor]")
        if anchor is not None and anchor <= self.now():
            raise _bad("billing_cycle_anchor must be in the future.", "subscription_data[billing_cycle_anchor]")
        session_id = self._new_id("cs")
        session = {
            "id": session_id,
            "object": "checkout.session",
            "created": self.now(),
            "expires_at": self.now() + DAY,
            "status": "open",
            "payment_status": "unpaid",
            "url": f"{self.url}/pay/{session_id}",
            "mode": mode,
            "customer": customer,
            "customer_email": _str(params, "customer_email"),
            "client_reference_id": _str(params, "client_reference_id"),
            "success_url": _str(params, "success_url"),
            "cancel_url": _str(params, "cancel_url"),
            "metadata": _merge_metadata({}, params.get("metadata")),
            "subscription": None,
            "livemode": False,
        }
        self._session_line_items[session_id] = stored_items
        self._session_subscription_metadata[session_id] = _merge_metadata({}, subscription_data.get("metadata"))
        self._session_anchor[session_id] = anchor
        return self._store(session)

    def _retrieve_checkout_session(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params)
        return self._render(self._find("checkout.session", id, "checkout.session"))

    def _create_portal_session(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "customer", "return_url", "configuration", "locale")
        customer = _str(params, "customer", required=True)
        self._find("customer", customer, "customer", param="customer", status=400)
        session_id = self._new_id("bps")
        session = {
            "id": session_id,
            "object": "billing_portal.session",
            "created": self.now(),
            "customer": customer,
            "return_url": _str(params, "return_url"),
            "url": f"{self.url}/portal/{session_id}",
            "livemode": False,
        }
        return self._store(session)

    # --- products and prices ---

    def _create_product(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "id", "name", "metadata", "active", "description")
        product_id = _str(params, "id") or self._new_id("prod")
        if product_id in self._objects:
            raise _bad("Product already exists.", "id", code="resource_already_exists")
        product = {
            "id": product_id,
            "object": "product",
            "created": self.now(),
            "updated": self.now(),
            "name": _str(params, "name", required=True),
            "description": _str(params, "description"),
            "active": _bool(params, "active") is not False,
            "metadata": _merge_metadata({}, params.get("metadata")),
            "default_price": None,
            "livemode": False,
        }
        return self._store(product)

    def _retrieve_product(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params)
        return self._render(self._find("product", id, "product"))

    def _update_product(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params, "name", "metadata", "active", "description")
        product = self._find("product", id, "product")
        metadata = _merge_metadata(product["metadata"], params.get("metadata"))
        if "name" in params:
            product["name"] = _str(params, "name", required=True)
        if "description" in params:
            product["description"] = _str(params, "description")
        if (active := _bool(params, "active")) is not None:
            product["active"] = active
        product["metadata"] = metadata
        product["updated"] = self.now()
        return self._render(product)

    def _list_prices(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "lookup_keys", "active", "product", "type", "currency", "limit", "starting_after")
        prices = self._all("price")
        lookup_keys = params.get("lookup_keys")
        if lookup_keys is not None:
            if not isinstance(lookup_keys, list):
                raise _bad("Invalid array: lookup_keys must be an array", "lookup_keys")
            if len(lookup_keys) > 10:
                raise _bad("lookup_keys can have at most 10 items", "lookup_keys")
            prices = [p for p in prices if p["lookup_key"] in lookup_keys]
        if (active := _bool(params, "active")) is not None:
            prices = [p for p in prices if p["active"] == active]
        for name in ("product", "type", "currency"):
            if (value := _str(params, name)) is not None:
                prices = [p for p in prices if p[name] == value]
        return self._list("/v1/prices", prices, params)

    def _create_price(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(
            params,
            "product",
            "currency",
            "unit_amount",
            "unit_amount_decimal",
            "recurring",
            "billing_scheme",
            "tiers_mode",
            "tiers",
            "lookup_key",
            "transfer_lookup_key",
            "nickname",
            "metadata",
            "active",
        )
        currency = _str(params, "currency", required=True).lower()
        if not re.fullmatch(r"[a-z]{3}", currency):
            raise _bad(f"Invalid currency: {currency}", "currency")
        product = _str(params, "product", required=True)
        self._find("product", product, "product", param="product", status=400)
        scheme = _str(params, "billing_scheme", choices=("per_unit", "tiered")) or "per_unit"
        unit_amount, unit_amount_decimal = self._amounts(params)
        tiers_mode = _str(params, "tiers_mode", choices=("graduated", "volume"))
        tiers = None
        if scheme == "per_unit":
            if unit_amount_decimal is None:
                raise _bad("You must pass either `unit_amount` or `unit_amount_decimal`.", "unit_amount")
            if tiers_mode or "tiers" in params:
                raise _bad("`tiers` and `tiers_mode` are only allowed with `billing_scheme=tiered`.", "tiers")
        else:
            if unit_amount_decimal is not None:
                raise _bad("`unit_amount` is not allowed with `billing_scheme=tiered`.", "unit_amount")
            if tiers_mode is None:
                raise _missing("tiers_mode")
            tiers = self._tiers(params.get("tiers"))
        recurring = self._recurring(params.get("recurring"))
        metadata = _merge_metadata({}, params.get("metadata"))
        nickname = _str(params, "nickname")
        active = _bool(params, "active") is not False
        lookup_key = _str(params, "lookup_key")
        # Last, once nothing else can fail: this may take the key from another price.
        self._claim_lookup_key(lookup_key, _bool(params, "transfer_lookup_key") or False, None)
        price = {
            "id": self._new_id("price"),
            "object": "price",
            "created": self.now(),
            "active": active,
            "billing_scheme": scheme,
            "currency": currency,
            "custom_unit_amount": None,
            "livemode": False,
            "lookup_key": lookup_key,
            "metadata": metadata,
            "nickname": nickname,
            "product": product,
            "recurring": recurring,
            "tax_behavior": "unspecified",
            "tiers_mode": tiers_mode,
            "transform_quantity": None,
            "type": "recurring" if recurring else "one_time",
            "unit_amount": unit_amount,
            "unit_amount_decimal": unit_amount_decimal,
        }
        if tiers is not None:
            self._price_tiers[price["id"]] = tiers
        return self._store(price)

    @staticmethod
    def _amounts(params: dict[str, Any], where: str = "", name: str = "unit_amount") -> tuple[int | None, str | None]:
        """`unit_amount` (an integer) or `unit_amount_decimal` (a decimal string), in the hash `where` (e.g.
        "tiers[0]"; "" for the top level): Stripe returns both, the integer one None when there is a fraction."""

        def param(n: str) -> str:
            return f"{where}[{n}]" if where else n

        amount = _int(params, name, param=param(name))
        decimal = params.get(f"{name}_decimal")
        if amount is not None and decimal is not None:
            raise _bad(f"You may only specify one of these parameters: {name}, {name}_decimal.", param(name))
        if amount is not None:
            if amount < 0:
                raise _bad(f"Invalid {name}: must be at least 0", param(name))
            return amount, str(amount)
        if decimal is None:
            return None, None
        text = _decimal(decimal, param(f"{name}_decimal"))
        whole = Decimal(text) == Decimal(text).to_integral_value()
        return (int(Decimal(text)) if whole else None), text

    def _tiers(self, tiers: Any) -> list[dict[str, Any]]:
        if not tiers or not isinstance(tiers, list):
            raise _missing("tiers")
        out, previous = [], 0
        for i, tier in enumerate(tiers):
            param = f"tiers[{i}]"
            if not isinstance(tier, dict):
                raise _bad("Invalid object", param)
            _allow_nested(
                tier, param, "up_to", "unit_amount", "unit_amount_decimal", "flat_amount", "flat_amount_decimal"
            )
            if tier.get("up_to") == "inf":
                up_to = None
            else:
                up_to = _int(tier, "up_to", required=True, param=f"{param}[up_to]")
                if up_to <= previous:
                    raise _bad("Tiers must be in increasing order of `up_to`.", f"{param}[up_to]")
                previous = up_to
            if (up_to is None) != (i == len(tiers) - 1):
                raise _bad("The last tier, and only the last, must have `up_to=inf`.", f"{param}[up_to]")
            unit_amount, unit_amount_decimal = self._amounts(tier, param)
            flat_amount, flat_amount_decimal = self._amounts(tier, param, "flat_amount")
            if unit_amount_decimal is None and flat_amount_decimal is None:
                raise _bad("Each tier needs a unit amount or a flat amount.", param)
            out.append(
                {
                    "flat_amount": flat_amount,
                    "flat_amount_decimal": flat_amount_decimal,
                    "unit_amount": unit_amount,
                    "unit_amount_decimal": unit_amount_decimal,
                    "up_to": up_to,
                }
            )
        return out

    def _recurring(self, recurring: Any) -> dict[str, Any] | None:
        if recurring is None:
            return None
        if not isinstance(recurring, dict):
            raise _bad("Invalid object: recurring must be a hash", "recurring")
        _allow_nested(recurring, "recurring", "interval", "interval_count", "usage_type", "meter")
        interval = _str(
            recurring, "interval", required=True, choices=("day", "week", "month", "year"), param="recurring[interval]"
        )
        usage_type = (
            _str(recurring, "usage_type", choices=("licensed", "metered"), param="recurring[usage_type]") or "licensed"
        )
        meter = _str(recurring, "meter", param="recurring[meter]")
        if usage_type == "metered" and meter is None:
            # Since API version 2025-03-31.basil metered prices are billed from a meter's events.
            raise _bad("A metered price needs a `recurring[meter]`.", "recurring[meter]", code="parameter_missing")
        if usage_type == "licensed" and meter is not None:
            raise _bad("`recurring[meter]` is only allowed with `recurring[usage_type]=metered`.", "recurring[meter]")
        if meter is not None:
            self._find("billing.meter", meter, "billing meter", param="recurring[meter]", status=400)
        return {
            "interval": interval,
            "interval_count": _int(recurring, "interval_count", param="recurring[interval_count]") or 1,
            "meter": meter,
            "trial_period_days": None,
            "usage_type": usage_type,
        }

    def _claim_lookup_key(self, lookup_key: str | None, transfer: bool, price_id: str | None) -> None:
        """A lookup key belongs to one price at most: taking a taken one needs `transfer_lookup_key=true`,
        which removes it from the price that had it."""
        if lookup_key is None:
            return
        for other in self._all("price"):
            if other["lookup_key"] == lookup_key and other["id"] != price_id:
                if not transfer:
                    raise _bad(
                        f"A price (`{other['id']}`) already uses that lookup key. Pass `transfer_lookup_key=true` "
                        "to move it to this price.",
                        "lookup_key",
                    )
                other["lookup_key"] = None

    def _update_price(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params, "active", "metadata", "nickname", "lookup_key", "transfer_lookup_key")
        price = self._find("price", id, "price")
        metadata = _merge_metadata(price["metadata"], params.get("metadata"))
        active = _bool(params, "active")
        nickname = _str(params, "nickname")
        if "lookup_key" in params:
            lookup_key = _str(params, "lookup_key")
            self._claim_lookup_key(lookup_key, _bool(params, "transfer_lookup_key") or False, price["id"])
            price["lookup_key"] = lookup_key
        if "nickname" in params:
            price["nickname"] = nickname
        if active is not None:
            price["active"] = active
        price["metadata"] = metadata
        return self._render(price)

    # --- billing meters and meter events ---

    def _list_meters(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "status", "limit", "starting_after")
        meters = self._all("billing.meter")
        if (status := _str(params, "status", choices=("active", "inactive"))) is not None:
            meters = [m for m in meters if m["status"] == status]
        return self._list("/v1/billing/meters", meters, params)

    def _create_meter(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "display_name", "event_name", "default_aggregation", "customer_mapping", "value_settings")
        display_name = _str(params, "display_name", required=True)
        event_name = _str(params, "event_name", required=True)
        aggregation = _dict(params, "default_aggregation")
        _allow_nested(aggregation, "default_aggregation", "formula")
        formula = _str(aggregation, "formula", choices=("sum", "count", "last"))
        if formula is None:
            raise _missing("default_aggregation[formula]")
        mapping = _dict(params, "customer_mapping")
        _allow_nested(mapping, "customer_mapping", "event_payload_key", "type")
        value_settings = _dict(params, "value_settings")
        _allow_nested(value_settings, "value_settings", "event_payload_key")
        if any(m["event_name"] == event_name for m in self._all("billing.meter")):
            raise _bad(f"A meter with event_name `{event_name}` already exists.", "event_name")
        now = self.now()
        meter = {
            "id": self._new_id("mtr"),
            "object": "billing.meter",
            "created": now,
            "updated": now,
            "display_name": display_name,
            "event_name": event_name,
            "event_time_window": None,
            "status": "active",
            "status_transitions": {"deactivated_at": None},
            "default_aggregation": {"formula": formula},
            "customer_mapping": {
                "event_payload_key": _str(mapping, "event_payload_key") or "stripe_customer_id",
                "type": _str(mapping, "type", choices=("by_id",)) or "by_id",
            },
            "value_settings": {"event_payload_key": _str(value_settings, "event_payload_key") or "value"},
            "livemode": False,
        }
        return self._store(meter)

    def _retrieve_meter(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params)
        return self._render(self._find("billing.meter", id, "billing meter"))

    def _create_meter_event(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "event_name", "payload", "identifier", "timestamp")
        event_name = _str(params, "event_name", required=True)
        meter = next(
            (m for m in self._all("billing.meter") if m["event_name"] == event_name and m["status"] == "active"),
            None,
        )
        if meter is None:
            raise _bad(f"No active meter found for event_name `{event_name}`.", "event_name")
        payload = params.get("payload")
        if not isinstance(payload, dict):
            raise _missing("payload")
        customer_key = meter["customer_mapping"]["event_payload_key"]
        customer = _str(payload, customer_key, required=True, param=f"payload[{customer_key}]")
        self._find("customer", customer, "customer", param=f"payload[{customer_key}]", status=400)
        value_key = meter["value_settings"]["event_payload_key"]
        if meter["default_aggregation"]["formula"] == "count" and value_key not in payload:
            value = 1
        else:
            value = _int(payload, value_key, required=True, param=f"payload[{value_key}]")
        now = self.now()
        timestamp = _int(params, "timestamp")
        timestamp = now if timestamp is None else timestamp
        if timestamp < now - MAX_METER_EVENT_AGE_S:
            raise _bad("Timestamp must be within the past 35 days.", "timestamp", code="timestamp_too_far_in_past")
        if timestamp > now + MAX_METER_EVENT_FUTURE_S:
            raise _bad("Timestamp must not be more than 5 minutes in the future.", "timestamp")
        identifier = _str(params, "identifier")
        if identifier is not None and len(identifier) > 100:
            raise _bad("Identifier can have up to 100 characters.", "identifier")
        if identifier in self._meter_event_answers:
            # Stripe counts an identifier once: a repeated one is answered but not counted again.
            self.duplicate_meter_events += 1
            return copy.deepcopy(self._meter_event_answers[identifier])
        identifier = identifier or self._new_id("mev_fake")  # Stripe makes one up when none is given
        self.meter_events.append(
            {
                "event_name": event_name,
                "customer": customer,
                "value": value,
                "identifier": identifier,
                "timestamp": timestamp,
                "payload": {str(k): str(v) for k, v in payload.items()},
            }
        )
        answer = {
            "object": "billing.meter_event",  # a meter event has no id: its identifier identifies it
            "created": now,
            "event_name": event_name,
            "identifier": identifier,
            "livemode": False,
            "payload": {str(k): str(v) for k, v in payload.items()},
            "timestamp": timestamp,
        }
        self._meter_event_answers[identifier] = answer
        return copy.deepcopy(answer)

    def _meter_event_summaries(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params, "customer", "start_time", "end_time", "value_grouping_window", "limit", "starting_after")
        meter = self._find("billing.meter", id, "billing meter")
        customer = _str(params, "customer", required=True)
        start = _int(params, "start_time", required=True)
        end = _int(params, "end_time", required=True)
        if start >= end:
            raise _bad("start_time must be before end_time.", "start_time")
        values = [
            e["value"]
            for e in sorted(self.meter_events, key=lambda e: e["timestamp"])  # stable: ties keep arrival order
            if e["event_name"] == meter["event_name"] and e["customer"] == customer and start <= e["timestamp"] < end
        ]
        formula = meter["default_aggregation"]["formula"]
        aggregated = {"sum": sum(values), "count": len(values), "last": values[-1] if values else 0}[formula]
        summary = {
            "id": self._new_id("mtrusg"),
            "object": "billing.meter_event_summary",
            "aggregated_value": float(aggregated),
            "start_time": start,
            "end_time": end,
            "meter": meter["id"],
            "livemode": False,
        }
        return {
            "object": "list",
            "data": [summary],
            "has_more": False,
            "url": f"/v1/billing/meters/{id}/event_summaries",
        }

    # --- subscriptions and invoices (read-only through the API; the helpers below change them) ---

    def _list_subscriptions(self, params: dict[str, Any]) -> dict[str, Any]:
        """By customer; `status` one value or "all" (Stripe's default leaves out canceled ones)."""
        _allow(params, "customer", "status", "limit", "starting_after")
        subscriptions = self._all("subscription")
        if (customer := _str(params, "customer")) is not None:
            subscriptions = [s for s in subscriptions if s["customer"] == customer]
        status = _str(params, "status")
        if status is None:
            subscriptions = [s for s in subscriptions if s["status"] not in ("canceled", "incomplete_expired")]
        elif status != "all":
            subscriptions = [s for s in subscriptions if s["status"] == status]
        subscriptions.sort(key=lambda s: s["created"])
        return self._list("/v1/subscriptions", subscriptions, params)

    def _retrieve_subscription(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params)
        return self._render(self._find("subscription", id, "subscription"))

    def _list_invoices(self, params: dict[str, Any]) -> dict[str, Any]:
        _allow(params, "customer", "status", "subscription", "limit", "starting_after")
        invoices = self._all("invoice")
        if (customer := _str(params, "customer")) is not None:
            invoices = [i for i in invoices if i["customer"] == customer]
        if (status := _str(params, "status", choices=("draft", "open", "paid", "uncollectible", "void"))) is not None:
            invoices = [i for i in invoices if i["status"] == status]
        if (subscription := _str(params, "subscription")) is not None:
            invoices = [i for i in invoices if _invoice_subscription(i) == subscription]
        invoices.sort(key=lambda i: i["created"])  # stable: _list reverses, so newest first, ties newest first
        return self._list("/v1/invoices", invoices, params)

    def _retrieve_invoice(self, params: dict[str, Any], id: str) -> dict[str, Any]:
        _allow(params)
        return self._render(self._find("invoice", id, "invoice"))

    # --- test-side helpers: what happens on Stripe's side without an API call from the product ---

    def complete_checkout(self, session_id: str, status: str = "active") -> dict[str, Any]:
        """The customer pays: a subscription (status `status`) is made from the session's line items and
        `subscription_data[metadata]`, and the session becomes complete and paid. A session without a
        customer gets a new one (from its `customer_email`). Returns the subscription."""
        with self._lock:
            session = self._objects[session_id]
            if session["object"] != "checkout.session" or session["mode"] != "subscription":
                raise ValueError(f"{session_id} is not a subscription-mode checkout session")
            if session["status"] != "open":
                raise ValueError(f"{session_id} is {session['status']}, not open")
            if session["customer"] is None:
                customer = self._create_customer(
                    {"email": session["customer_email"]} if session["customer_email"] else {}
                )
                session["customer"] = customer["id"]
            now = self.now()
            items = [(item["price"], item["quantity"]) for item in self._session_line_items[session_id]]
            subscription = {
                "id": self._new_id("sub"),
                "object": "subscription",
                "created": now,
                "start_date": now,
                "customer": session["customer"],
                "status": status,
                "metadata": dict(self._session_subscription_metadata[session_id]),
                "items": {"object": "list", "data": [], "has_more": False, "url": ""},
                "current_period_start": now,
                "current_period_end": self._session_anchor.get(session_id) or now + 30 * DAY,
                "cancel_at_period_end": False,
                "cancel_at": None,
                "canceled_at": None,
                "ended_at": None,
                "collection_method": "charge_automatically",
                "currency": self._objects[items[0][0]]["currency"],
                "latest_invoice": None,
                "livemode": False,
            }
            subscription["items"]["url"] = f"/v1/subscription_items?subscription={subscription['id']}"
            self._objects[subscription["id"]] = subscription
            self._set_items(subscription, items)
            session.update(status="complete", payment_status="paid", subscription=subscription["id"])
            return self._render(subscription)

    def _set_items(self, subscription: dict[str, Any], items: list[tuple[str, int | None]]) -> None:
        """Replaces the subscription's items by (price id, quantity) pairs; the first keeps its item id."""
        old = subscription["items"]["data"]
        data = []
        for i, (price_id, quantity) in enumerate(items):
            self._find("price", price_id, "price")
            data.append(
                {
                    "id": old[i]["id"] if i < len(old) else self._new_id("si"),
                    "object": "subscription_item",
                    "created": old[i]["created"] if i < len(old) else self.now(),
                    "subscription": subscription["id"],
                    "price": price_id,  # stored as an id, rendered as the whole (current) price
                    "quantity": quantity,
                    "metadata": {},
                    "current_period_start": subscription["current_period_start"],
                    "current_period_end": subscription["current_period_end"],
                }
            )
        subscription["items"]["data"] = data

    def set_subscription(self, sub_id: str, **fields: Any) -> dict[str, Any]:
        """Changes a subscription as Stripe would (a failed renewal -> `status="past_due"`, a plan change in the
        portal -> `price_lookup_key="pro_monthly"` or `price="price_3"`, which puts that price on the first item
        with quantity 1, or None if it is metered; `items=[("price_3", 1), ...]` for several). Periods set here
        are set on the items too. Other fields are set as given. Returns the subscription."""
        with self._lock:
            subscription = self._find("subscription", sub_id, "subscription")
            price_id = fields.pop("price", None)
            if (lookup_key := fields.pop("price_lookup_key", None)) is not None:
                matching = [p for p in self._all("price") if p["lookup_key"] == lookup_key]
                if not matching:
                    raise KeyError(f"no price has lookup key {lookup_key!r}")
                price_id = matching[0]["id"]
            items = fields.pop("items", None)
            if price_id is not None:
                metered = (self._find("price", price_id, "price")["recurring"] or {}).get("usage_type") == "metered"
                items = [(price_id, None if metered else 1)]
            subscription.update(fields)
            if items is not None:
                self._set_items(subscription, [tuple(item) for item in items])
            for name in ("current_period_start", "current_period_end"):
                if name in fields:
                    for item in subscription["items"]["data"]:
                        item[name] = fields[name]
            return self._render(subscription)

    def cancel_subscription(self, sub_id: str) -> dict[str, Any]:
        """The subscription ends now (status "canceled", `canceled_at` and `ended_at` set)."""
        now = self.now()
        return self.set_subscription(
            sub_id, status="canceled", canceled_at=now, ended_at=now, cancel_at_period_end=False
        )

    def create_invoice(
        self,
        customer: str,
        status: str = "open",
        amount_due: int = 0,
        subscription: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """An invoice as Stripe makes one (status "open" or "paid"; amounts in the smallest currency unit).
        Extra `fields` are set as given. Returns the invoice."""
        with self._lock:
            customer_obj = self._find("customer", customer, "customer")
            parent = None
            if subscription is not None:
                sub = self._find("subscription", subscription, "subscription")
                parent = {
                    "type": "subscription_details",
                    "quote_details": None,
                    "subscription_details": {"subscription": subscription, "metadata": dict(sub["metadata"])},
                }
            now = self.now()
            invoice_id = self._new_id("in")
            invoice = {
                "id": invoice_id,
                "object": "invoice",
                "created": now,
                "customer": customer,
                "customer_email": customer_obj["email"],
                "number": f"FAKE-{len(self._all('invoice')) + 1:04d}",
                "status": status,
                "currency": "usd",
                "amount_due": amount_due,
                "amount_paid": 0,
                "amount_remaining": amount_due,
                "total": amount_due,
                "period_start": now - 30 * DAY,
                "period_end": now,
                "due_date": None,
                "hosted_invoice_url": f"{self.url}/invoice/{invoice_id}",
                "invoice_pdf": f"{self.url}/invoice/{invoice_id}/pdf",
                "parent": parent,
                "status_transitions": {"finalized_at": now, "paid_at": None, "voided_at": None},
                "livemode": False,
            }
            self._objects[invoice_id] = invoice
            return self.set_invoice(invoice_id, status=status, **fields)

    def set_invoice(self, inv_id: str, **fields: Any) -> dict[str, Any]:
        """Changes an invoice; `status="paid"` also sets what Stripe sets with it (amount paid, paid_at) unless
        given. Returns the invoice."""
        with self._lock:
            invoice = self._find("invoice", inv_id, "invoice")
            invoice.update(fields)
            if fields.get("status") == "paid":
                if "amount_paid" not in fields:
                    invoice["amount_paid"] = invoice["amount_due"]
                invoice["amount_remaining"] = invoice["amount_due"] - invoice["amount_paid"]
                invoice["status_transitions"]["paid_at"] = invoice["status_transitions"]["paid_at"] or self.now()
            return self._render(invoice)

    def event(self, type: str, obj: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
        """The webhook event Stripe would send for `obj` (a dict, e.g. as returned by a helper):
        (the JSON body to post, the event as a dict). Sign the body with `sign(body, secret)`."""
        with self._lock:
            event = {
                "id": self._new_id("evt"),
                "object": "event",
                "api_version": API_VERSION,
                "created": self.now(),
                "type": type,
                "data": {"object": copy.deepcopy(obj)},
                "livemode": False,
                "pending_webhooks": 1,
                "request": {"id": None, "idempotency_key": None},
            }
            self.events.append(event)
            return json.dumps(event).encode("utf-8"), copy.deepcopy(event)


def _invoice_subscription(invoice: dict[str, Any]) -> str | None:
    details = (invoice.get("parent") or {}).get("subscription_details") or {}
    return details.get("subscription")


def _allow_nested(params: dict[str, Any], prefix: str, *names: str) -> None:
    for name in params:
        if name not in names:
            raise _bad(f"Received unknown parameter: {prefix}[{name}] (not modelled by tests/fake_stripe.py)", prefix)


def _injected_error(status: int) -> StripeFakeError:
    """The error answer of fail_next/fail_after_next, with the error type Stripe uses for that status."""
    if status == 429:
        return StripeFakeError(
            429, "Too many requests (injected by FakeStripe).", type="rate_limit_error", code="rate_limit"
        )
    kind = "api_error" if status >= 500 else "invalid_request_error"
    return StripeFakeError(status, f"An error occurred (injected by FakeStripe, HTTP {status}).", type=kind)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeStripe/1.0"

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        fake: FakeStripe = self.server.fake  # type: ignore[attr-defined]
        try:
            status, answer, extra_headers = fake._handle(method, self.path, headers, body)
        except Exception as e:  # a bug in the fake: answer it, so the test sees it rather than a dropped connection
            traceback.print_exc()
            status, extra_headers = 500, {}
            answer = {"error": {"type": "api_error", "message": f"FakeStripe crashed: {type(e).__name__}: {e}"}}
        data = json.dumps(answer).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Stripe-Version", headers.get("stripe-version") or API_VERSION)
            for name, value in extra_headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout): nothing to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests inspect FakeStripe.requests instead
