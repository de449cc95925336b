"""A flow defined in the test suite, for the proof that a live run asks the flows what
their answers hold: ``POST /v8/badge`` with a username and API key -> ``{"badge": <opaque
token>, "renewal": <another>, "expires_in": 600}``; protected calls send ``X-Badge``. Both
tokens are credentials only this flow knows of: ``badge`` its ``answer_field``,
``renewal`` in its ``secret_keys``. The stand-in registers it (``stand_in.py
badge_flow``), and so does the suite that runs live against it."""

from __future__ import annotations

import secrets
from typing import Any

from pytest_mgmtauth.flows import Answer, BearerFlow, BearerToken, Endpoint, Incoming, Received

LIFETIME = 600


class BadgeFlow(BearerFlow):
    name = "badge"
    title = "/v8/badge"
    path_title = "/v8/badge"
    grants_phrase = "/v8/badge badges"
    answer_field = "badge"
    secret_keys = ("renewal",)
    token_word = "badge"
    route_prefix = "/v8/"
    auth_hosts = ("api.tealiumiq.com",)
    api_hosts = ("api.tealiumiq.com",)
    endpoints = (Endpoint("badge", "/v8/badge", form=("username", "key")),)

    @classmethod
    def fix_churn(cls, options: Any) -> str:
        return "keep the badge from POST /v8/badge until its expires_in runs out"

    @classmethod
    def fix_expired(cls, options: Any) -> str:
        return "ask POST /v8/badge again before expires_in runs out"

    def answer_badge(self, incoming: Incoming) -> Answer:
        service = self.service
        user = incoming.form["username"]
        with service.mutex:
            now = service.timeline.now()
            refuse = self.refuse_auth(now)
            self.check_account(
                user, incoming.form["key"], now=now, client=incoming.client, refuse=refuse
            )
        badge, renewal = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        service.grants.token(self, user, badge, lifetime=LIFETIME, arrived=incoming.arrived)
        service.timeline.hold_secrets(badge, renewal)
        return Answer({"badge": badge, "renewal": renewal, "expires_in": LIFETIME})

    def read(self, received: Received) -> BearerToken:
        values = received.header("X-Badge")
        if not values:
            return BearerToken(missing=True, problem="send 'X-Badge: <badge>'")
        return BearerToken(token=values[0].strip())
