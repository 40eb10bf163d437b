"""Sign-in beyond a password: single sign-on by OpenID Connect (each organization its own identity
provider) and second factors (TOTP, WebAuthn/passkeys, recovery codes), both by django-allauth.

Passwords stay with the dashboard's own sign-in view (throttled, case-insensitive e-mail); it hands
the checked user to allauth's login flow, which asks for a second factor when the user has one.
allauth's own sign-up and password pages are not mounted: accounts are made by sign-up, invitation
or an organization's single sign-on (accounts/sso.py)."""

from __future__ import annotations

from .env import envbool, envint, envstr

IDENTITY_APPS = [
    "django.contrib.sites",  # allauth's social app model refers to sites; one site (SITE_ID)
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "allauth.mfa",
    "allauth.usersessions",  # each user's signed-in sessions, on their account page: sign out the others
    "django.contrib.humanize",  # allauth's sessions page writes "2 hours ago"
]
IDENTITY_MIDDLEWARE = [
    "allauth.account.middleware.AccountMiddleware",
    "allauth.usersessions.middleware.UserSessionsMiddleware",
]
SITE_ID = 1

ACCOUNT_ADAPTER = "accounts.sso.AccountAdapter"
SOCIALACCOUNT_ADAPTER = "accounts.sso.SsoAdapter"
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = "username"  # the e-mail address, lower case (accounts.actions)
ACCOUNT_EMAIL_VERIFICATION = "none"  # invitations prove an address; SSO: the proven domain's provider
# The password form throttles itself (TTS_LOGIN_*); allauth's `login_failed` stays: it limits guesses
# at second-factor codes.
ACCOUNT_RATE_LIMITS = {"login": None}
ACCOUNT_REAUTHENTICATION_TIMEOUT = 600  # seconds since a sign-in before changing second factors asks again
# An organization's provider is trusted for the addresses of the domain it proved (accounts/sso.py):
# an existing account of that address (no one else's) is connected by the adapter, and a new one is
# made just in time. allauth's own e-mail authentication is off: it would wipe the account's password.
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_QUERY_EMAIL = True
SOCIALACCOUNT_STORE_TOKENS = False  # nothing is called on the provider after sign-in
SOCIALACCOUNT_OPENID_CONNECT_URL_PREFIX = "sso"

MFA_SUPPORTED_TYPES = ["totp", "webauthn", "recovery_codes"]
MFA_TOTP_ISSUER = envstr("TTS_PRODUCT_NAME", "tts_saas")
MFA_PASSKEY_LOGIN_ENABLED = False  # passkeys are a second factor here, after the password
MFA_FORMS = {"authenticate": "accounts.mfa.SecondFactorForm"}  # the sign-in offers the factors one has

# Domain proof: the TXT record is looked up with these resolvers (empty: the system's).
TTS_DNS_NAMESERVERS = [s for s in envstr("TTS_DNS_NAMESERVERS").split(",") if s]
TTS_DNS_PORT = envint("TTS_DNS_PORT", 53)
# Identity providers on loopback or private addresses (tests, an in-house provider on the LAN).
TTS_SSO_ALLOW_PRIVATE = envbool("TTS_SSO_ALLOW_PRIVATE", False)
