"""Checks in auth terms over one test's timeline, and the messages that explain them.

Pure functions of the events (no pytest): each ``check_*`` raises ``AssertionError``
with a message that reads like a diagnosis, in this order: what went wrong in one
sentence naming the account and the first offending credential, the account's
credential timeline in simulated time since the test started, then the fix. The
plugin decides whether a finding fails a test or becomes a warning.

Credentials appear as their per-test labels (``T1``, ``S2``) and fingerprints, never
whole; the reasons on events are written the same way by the service.
"""

from __future__ import annotations

from ._checks import (
    _fix_churn as _fix_churn,
)
from ._checks import (
    _open_sessions as _open_sessions,
)
from ._checks import (
    check_auth_count as check_auth_count,
)
from ._checks import (
    check_logged_out as check_logged_out,
)
from ._checks import (
    check_no_expired_credential_used as check_no_expired_credential_used,
)
from ._checks import (
    check_single_flight as check_single_flight,
)
from ._checks import (
    check_token_reused as check_token_reused,
)
from ._checks import (
    churn_message as churn_message,
)
from ._checks import (
    expired_use_message as expired_use_message,
)
from ._checks import (
    open_session_message as open_session_message,
)
from ._findings import (
    _KIND_TITLES as _KIND_TITLES,
)
from ._findings import (
    _MESSAGES as _MESSAGES,
)
from ._findings import (
    _SECTION_LINES as _SECTION_LINES,
)
from ._findings import (
    _SECTION_REJECTIONS as _SECTION_REJECTIONS,
)
from ._findings import (
    KINDS as KINDS,
)
from ._findings import (
    WARNINGS as WARNINGS,
)
from ._findings import (
    AuthFindingWarning as AuthFindingWarning,
)
from ._findings import (
    ExpiredCredentialWarning as ExpiredCredentialWarning,
)
from ._findings import (
    Finding as Finding,
)
from ._findings import (
    OpenSessionWarning as OpenSessionWarning,
)
from ._findings import (
    TokenChurnWarning as TokenChurnWarning,
)
from ._findings import (
    _accounts_of as _accounts_of,
)
from ._findings import (
    default_kinds as default_kinds,
)
from ._findings import (
    finding_counts as finding_counts,
)
from ._findings import (
    findings as findings,
)
from ._findings import (
    report_section as report_section,
)
from ._scene import (
    AuthSummary as AuthSummary,
)

# The checks live in four modules; every name stays importable from here.
from ._scene import (
    Scene as Scene,
)
from ._scene import (
    _is_grant as _is_grant,
)
from ._scene import (
    _is_rejection as _is_rejection,
)
from ._scene import (
    _label as _label,
)
from ._scene import (
    _version as _version,
)
from ._scene import (
    concurrent_grants as concurrent_grants,
)
from ._scene import (
    premature_grants as premature_grants,
)
from ._scene import (
    summarize as summarize,
)
from ._timeline_text import (
    _CONTEXT_AFTER as _CONTEXT_AFTER,
)
from ._timeline_text import (
    _CONTEXT_BEFORE as _CONTEXT_BEFORE,
)
from ._timeline_text import (
    _HEAD as _HEAD,
)
from ._timeline_text import (
    _annotate as _annotate,
)
from ._timeline_text import (
    _credentials_table as _credentials_table,
)
from ._timeline_text import (
    _describe as _describe,
)
from ._timeline_text import (
    _duration as _duration,
)
from ._timeline_text import (
    _involves as _involves,
)
from ._timeline_text import (
    _labels as _labels,
)
from ._timeline_text import (
    _Line as _Line,
)
from ._timeline_text import (
    _lines as _lines,
)
from ._timeline_text import (
    _preceding_call as _preceding_call,
)
from ._timeline_text import (
    _render as _render,
)
from ._timeline_text import (
    _times as _times,
)
from ._timeline_text import (
    format_timeline as format_timeline,
)
