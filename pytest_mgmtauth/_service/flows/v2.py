"""v2: ``POST /v2/auth`` with username and API key -> a 30-minute RS512 JWT, sent as
``Authorization: Bearer <token>``."""

from __future__ import annotations

from .base import Answer, Endpoint, Incoming, Sets, remember_me
from .bearer import BearerFlow


class V2Flow(BearerFlow):
    name = "v2"
    title = "/v2/auth"
    path_title = "/v2/auth"
    grants_phrase = "/v2/auth tokens"
    auth_hosts = ("api.tealiumiq.com",)
    api_hosts = ("api.tealiumiq.com",)
    endpoints = (Endpoint("grant", "/v2/auth", form=("username", "key")),)
    sets = (Sets("token_ttl", "body.token.jwt.lifetime"),)

    def answer_grant(self, incoming: Incoming) -> Answer:
        token, _ = self.grant(
            incoming.form["username"],
            incoming.form["key"],
            arrived=incoming.arrived,
            client=incoming.client,
        )
        return Answer({"token": token}, cookies=(remember_me(self.service.timeline.now()),))
