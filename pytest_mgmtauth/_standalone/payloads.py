"""What the control API answers with: events, requests, accounts and scripted faults as
JSON objects."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._service.accounts import fingerprint
from .._service.events import iso_time as _iso

if TYPE_CHECKING:
    from .._http.request_log import RecordedRequest
    from .._service.accounts import Account
    from .._service.events import Event
    from .._service.faults import ScriptedFault
    from .._service.flows.oauth_clients import OAuthClient


def event_json(event: Event) -> dict[str, Any]:
    """An event as a JSON object: ``type``, ``description``, then its fields."""
    data: dict[str, Any] = {"type": type(event).__name__}
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if isinstance(value, datetime):
            value = _iso(value)
        elif isinstance(value, tuple):
            value = list(value)
        fields[field.name] = value
    data["description"] = event.describe(_iso)
    data.update(fields)
    return data


def request_json(entry: RecordedRequest) -> dict[str, Any]:
    """A request log entry as a JSON object: its fields, ``headers`` as ``[name, value]``
    pairs in order, ``at`` in ISO 8601 UTC."""
    return {
        "method": entry.method,
        "host": entry.host,
        "path": entry.path,
        "query": entry.query,
        "headers": [[name, value] for name, value in entry.headers],
        "body": entry.body,
        "status": entry.status,
        "at": _iso(entry.at),
        "test": entry.test,
    }


def account_json(account: Account) -> dict[str, Any]:
    # A local test tool: the control API hands out the generated credentials on purpose.
    return {
        "username": account.username,
        "api_key": account.api_key,
        "password": account.password,
        "permissions": None if account.permissions is None else sorted(account.permissions),
        "profiles": None
        if account.profiles is None
        else [f"{a}/{p}" for a, p in sorted(account.profiles)],
    }


def client_json(client: OAuthClient, *, secret: bool) -> dict[str, Any]:
    """An OAuth client: its secret whole when it is handed out (on creation, at
    startup), else as its fingerprint (a listing)."""
    return {
        "client_id": client.client_id,
        "client_secret": client.client_secret if secret else fingerprint(client.client_secret),
        "scopes": list(client.scopes),
    }


def fault_json(fault: ScriptedFault) -> dict[str, Any]:
    data = {k: v for k, v in dataclasses.asdict(fault).items() if v is not None}
    data["description"] = fault.describe()
    data["endpoints"] = fault.endpoints
    return data
