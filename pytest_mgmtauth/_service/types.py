"""The service's vocabulary as types: the words that parameters and fields take."""

from __future__ import annotations

from typing import Literal, TypeAlias

#: The secret an account authenticates with (each flow says which).
SecretKind: TypeAlias = Literal["API key", "password", "client secret"]
#: Why a session ended: ``/v1/logout``, idle timeout, or on cue.
EndReason: TypeAlias = Literal["logout", "timeout", "revoked", "expired"]
#: How a credential is ended on cue (``mgmt_server.expire`` / ``revoke``).
EndOnCue: TypeAlias = Literal["expired", "revoked"]
#: A scripted fault of the next auth calls (``fail_next`` and friends).
ScriptedKind: TypeAlias = Literal["fail", "hang", "reset", "malformed"]
#: A fault scheduled at a trigger point (``schedule_fault``, sweeps).
ScheduledKind: TypeAlias = Literal["expire", "revoke", "throttle", "unavailable", "reset"]
