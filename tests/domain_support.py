"""A protected call driven through the domain's one door, ``AuthService.admit``, as the
transport makes it: its credential sent as a client sends it (a bearer token in
``Authorization``, a v1 session in its cookie and ``utk``), arrived at the fake's own
address."""

from __future__ import annotations

from pytest_mgmtauth._service.flows.base import Received, Where
from pytest_mgmtauth._service.records import Authorization
from pytest_mgmtauth._service.service import AuthService


def admitted(
    service: AuthService,
    version: str,
    *,
    token: str | None = None,
    authorization: str | None = None,
    session: str | None = None,
    utk: str | None = None,
    method: str = "GET",
    path: str = "/x",
    permission: str | None = None,
    scope: str | None = None,
) -> Authorization:
    """The authorization of a protected call of a route of flow ``version`` that sent
    ``token`` as a bearer token (or ``authorization`` as the header's value), or the v1
    ``session`` cookie and ``utk``; raises the service's ``Refusal``."""
    if token is not None:
        authorization = f"Bearer {token}"
    received = Received(
        method=method,
        path=path,
        where=Where(None, "127.0.0.1:8080"),
        headers=() if authorization is None else (("Authorization", authorization),),
        cookies={} if session is None else {"JSESSIONID": session},
        query=() if utk is None else (("utk", utk),),
    )
    return service.admit(version, received, permission=permission, scope=scope)[0]
