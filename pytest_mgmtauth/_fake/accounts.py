"""``MgmtServer``'s accounts and OAuth clients: what a test sets up to authenticate with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._service.flows.base import ClientFlow
from .._service.flows.registry import client_flow

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .._service.accounts import Account
    from .._service.flows.registry import OAuthClient
    from .._service.service import AuthService


class Accounts:
    """The accounts and OAuth clients of a test (a part of ``MgmtServer``)."""

    _service: AuthService

    def add_account(
        self,
        username: str | None = None,
        *,
        api_key: str | None = None,
        password: str | None = None,
        permissions: Iterable[str] | None = None,
        profiles: Iterable[str | tuple[str, str]] | None = None,
    ) -> Account:
        """Register an account; anything left out is generated (API keys contain
        characters that must be URL-encoded; see :class:`~pytest_mgmtauth.Account`).

        ``username`` must be an e-mail address (contain ``@``) and be new in this test;
        ``api_key`` and ``password`` non-empty strings; ``permissions`` an iterable of
        permission names (``None``: every permission, ``[]``: none); ``profiles`` the v3
        pairs it may get tokens for, an iterable of ``"account/profile"`` strings or
        ``(account, profile)`` tuples, ``"account/*"`` for every profile of an account
        (``None``: any pair). Wrong values raise ``ValueError`` or ``TypeError`` in the
        test."""
        return self._service.accounts.add_account(
            username,
            api_key=api_key,
            password=password,
            permissions=permissions,
            profiles=profiles,
        )

    @property
    def accounts(self) -> list[Account]:
        """The accounts of this test, in the order they were added (a new list)."""
        return self._service.accounts.account_list()

    # -- OAuth clients (the developer portal's client credentials, docs/oauth.md) ------

    def add_client(
        self,
        scopes: Iterable[str] | None = None,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
    ) -> OAuthClient:
        """Register an OAuth client of the developer portal (docs/oauth.md) that may get
        tokens for ``scopes``, an iterable of scope strings (``None``: the default scope
        ``acme:main:tiq:2026-07:profiles:manage``; ``[]``: none, so the client gets
        ``unauthorized_client``); the id and secret are generated unless given (the
        secret of letters and digits, as the developer portal's; see
        :class:`~pytest_mgmtauth.OAuthClient`). A malformed scope, a ``str`` for
        ``scopes`` or an id in use raises ``ValueError`` or ``TypeError``."""
        return self._client_flow().add_client(
            scopes, client_id=client_id, client_secret=client_secret
        )

    @property
    def clients(self) -> list[OAuthClient]:
        """The OAuth clients of this test, in the order they were added (a new list)."""
        with self._service.mutex:
            return list(self._client_flow().clients.values())

    def rotate_client_secret(
        self, client: OAuthClient | str, new_secret: str | None = None
    ) -> OAuthClient:
        """Give the client a new secret (generated unless given); the old one gets
        invalid_client from now on. Tokens already granted stay valid."""
        return self._client_flow().rotate_client_secret(_client_id(client), new_secret)

    def revoke_client(self, client: OAuthClient | str) -> None:
        """The client gets no more tokens (invalid_grant); those it holds stay valid
        until they expire (``revoke(token)`` ends one)."""
        self._client_flow().revoke_client(_client_id(client))

    def _client_flow(self) -> ClientFlow[OAuthClient]:
        flow = self._service.flows[client_flow().name]
        assert isinstance(flow, ClientFlow)
        return flow


def _client_id(client: OAuthClient | str) -> str:
    return client if isinstance(client, str) else client.client_id
