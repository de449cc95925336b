"""The service's vocabulary as types: the words that parameters and fields take."""

from __future__ import annotations

from typing import Literal, TypeAlias

#: An auth flow: v1 sessions (``/v1/login``), v2 and v3 bearer tokens; also what a
#: route declares with ``auth=``.
Version: TypeAlias = Literal["v1", "v2", "v3"]
#: The flows that grant a bearer token.
BearerVersion: TypeAlias = Literal["v2", "v3"]
#: The secret an account authenticates with: v2/v3 take its API key, v1 its password.
SecretKind: TypeAlias = Literal["API key", "password"]
#: Why a v1 session ended: ``/v1/logout``, idle timeout, or on cue.
EndReason: TypeAlias = Literal["logout", "timeout", "revoked", "expired"]
#: How a credential is ended on cue (``mgmt_server.expire`` / ``revoke``).
EndOnCue: TypeAlias = Literal["expired", "revoked"]
#: A scripted fault of the next auth calls (``fail_next`` and friends).
ScriptedKind: TypeAlias = Literal["fail", "hang", "reset", "malformed"]
#: A fault scheduled at a trigger point (``schedule_fault``, sweeps).
ScheduledKind: TypeAlias = Literal["expire", "revoke", "throttle", "unavailable", "reset"]
