"""Sign-in pages' helpers: where passkeys cannot work (a page reached by an IP address: WebAuthn
needs a domain name, and a passkey belongs to the name it was made at) and which browser a signed-in
session is (a user-agent string read as "Chrome on Linux")."""

from __future__ import annotations

import ipaddress
import re

from django import template

register = template.Library()

LOOPBACK_NAME = "localhost"  # a browser treats it as a secure context over plain http, as WebAuthn needs


def _ip_host(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    name = host[1 : host.index("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@register.simple_tag(takes_context=True)
def passkeys_refused(context, path: str = "") -> dict | None:
    """None where passkeys work; at an IP address, that address and (on loopback) the same page at
    localhost, where they do (`path`: another page there, e.g. the sign-in, as the session stays here)."""
    request = context["request"]
    host = request.get_host()
    address = _ip_host(host)
    if address is None:
        return None
    there = ""
    if address.is_loopback:
        port = request.get_port()
        default = "443" if request.is_secure() else "80"
        netloc = LOOPBACK_NAME if port == default else f"{LOOPBACK_NAME}:{port}"
        there = f"{request.scheme}://{netloc}{path or request.get_full_path()}"
    return {"address": str(address), "url": there}


# Order matters: Edge and Opera say "Chrome" too, Chrome says "Safari", Android says "Linux".
BROWSERS = [
    ("Edge", r"\bEdg(?:e|A|iOS)?/"),
    ("Opera", r"\bOPR/|\bOpera\b"),
    ("Firefox", r"\bFirefox/|\bFxiOS/"),
    ("Chromium", r"\bChromium/"),
    ("Chrome", r"\b(?:Headless)?Chrome/|\bCriOS/"),
    ("Safari", r"\bVersion/[\d.]+.*\bSafari/"),
]
SYSTEMS = [
    ("Android", r"\bAndroid\b"),
    ("iOS", r"\biPhone\b|\biPad\b|\biPod\b"),
    ("ChromeOS", r"\bCrOS\b"),
    ("Windows", r"\bWindows\b"),
    ("macOS", r"\bMac OS X\b|\bMacintosh\b"),
    ("Linux", r"\bLinux\b|\bX11\b"),
]


@register.filter
def browser_label(user_agent: str | None) -> str:
    """A user agent as "Chrome on Linux"; a program by its own name ("curl"); else "Unknown browser"."""
    agent = user_agent or ""
    browser = next((name for name, pattern in BROWSERS if re.search(pattern, agent)), None)
    system = next((name for name, pattern in SYSTEMS if re.search(pattern, agent)), None)
    if browser is None:
        program = re.match(r"([A-Za-z][\w.-]*)/[\d.]", agent)
        browser = program.group(1) if program and program.group(1) != "Mozilla" else "Unknown browser"
    return f"{browser} on {system}" if system else browser
