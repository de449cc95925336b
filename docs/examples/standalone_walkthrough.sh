#!/usr/bin/env bash
# The curl walkthrough of docs/standalone.md, as one script (tests/standalone runs it).
# Start the server first, in another terminal:
#
#   mgmtauth-server \
#     --account '{"username": "alice@example.com", "api_key": "s3cret+key&with=chars%/", "password": "pa55+word&"}' \
#     --route 'GET /v2/things' --route 'GET /v1/things'
#
# It ends with the verdicts of /_mgmtauth/check and exits 1 on a finding it did not
# expect; CHURN=1 makes its last client re-authenticate before every call, to see one.
set -euo pipefail

# --8<-- [start:setup]
BASE=${BASE:-http://127.0.0.1:8765}
USERNAME='alice@example.com'
API_KEY='s3cret+key&with=chars%/'
PASSWORD='pa55+word&'
# --8<-- [end:setup]

echo "== v2: API key -> bearer token -> a call"
# --8<-- [start:v2]
# --data-urlencode encodes the + & = % of the key; never paste it into -d as it is.
TOKEN=$(curl -sS "$BASE/v2/auth" \
  --data-urlencode "username=$USERNAME" --data-urlencode "key=$API_KEY" |
  sed -E 's/.*"token": "([^"]+)".*/\1/')
curl -sS "$BASE/v2/things" -H "Authorization: Bearer $TOKEN" -w ' -> %{http_code}\n'
# --8<-- [end:v2]

echo "== expiry: advance the simulated clock by 30 minutes"
# --8<-- [start:expiry]
curl -sS --fail "$BASE/_mgmtauth/clock/advance" \
  -H 'Content-Type: application/json' -d '{"minutes": 30}' -w '\n'
curl -sS "$BASE/v2/things" -H "Authorization: Bearer $TOKEN" -w ' -> %{http_code}\n'
# --8<-- [end:expiry]

echo "== v1: password -> JSESSIONID + utk -> a call -> logout"
# --8<-- [start:v1]
LOGIN=$(curl -sS -i "$BASE/v1/login" \
  --data-urlencode "username=$USERNAME" --data-urlencode "password=$PASSWORD")
SESSION=$(printf '%s\n' "$LOGIN" | sed -nE 's/^Set-Cookie: JSESSIONID=([^;]*);.*/\1/p')
UTK=$(printf '%s\n' "$LOGIN" | sed -nE 's/.*"utk": "([^"]+)".*/\1/p')
curl -sS "$BASE/v1/things?utk=$UTK" -H "Cookie: JSESSIONID=$SESSION" -w ' -> %{http_code}\n'
curl -sS -X POST "$BASE/v1/logout" -H "Cookie: JSESSIONID=$SESSION" -w ' -> %{http_code}\n'
# --8<-- [end:v1]

echo "== throttling: a new token for every call"
# --8<-- [start:throttle]
# fresh state, same accounts (control POSTs are JSON: -H and -d '{}' even with no fields)
curl -sS --fail "$BASE/_mgmtauth/reset" -H 'Content-Type: application/json' -d '{}' -o /dev/null
for i in 1 2 3 4 5 6 7; do
  curl -sS -o /dev/null -w '%{http_code} ' "$BASE/v2/auth" \
    --data-urlencode "username=$USERNAME" --data-urlencode "key=$API_KEY"
done
echo
curl -sS -i "$BASE/v2/auth" \
  --data-urlencode "username=$USERNAME" --data-urlencode "key=$API_KEY" | grep -i '^retry-after'
# --8<-- [end:throttle]

echo "== faults: a 503, then a connection reset"
# --8<-- [start:faults]
curl -sS --fail "$BASE/_mgmtauth/faults" -H 'Content-Type: application/json' \
  -d '{"kind": "fail", "error": 503}' -o /dev/null
curl -sS --fail "$BASE/_mgmtauth/faults" -H 'Content-Type: application/json' \
  -d '{"kind": "reset"}' -o /dev/null
curl -sS -o /dev/null -w '%{http_code}\n' -X POST "$BASE/v2/auth" -d 'username=x&key=y'
curl -sS -X POST "$BASE/v2/auth" -d 'username=x&key=y' || echo "curl exit status $?"
# --8<-- [end:faults]

echo "== the timeline"
# --8<-- [start:events]
curl -sS "$BASE/_mgmtauth/events" | grep -o '"description": "[^"]*"'
# --8<-- [end:events]

echo "== verdicts: a client that reuses its token, checked"
# --8<-- [start:check]
curl -sS -X POST "$BASE/_mgmtauth/reset" -o /dev/null -H 'Content-Type: application/json' -d '{}'
auth() {
  curl -sS "$BASE/v2/auth" --data-urlencode "username=$USERNAME" --data-urlencode "key=$API_KEY" |
    sed -E 's/.*"token": "([^"]+)".*/\1/'
}
TOKEN=$(auth)
for i in 1 2 3; do
  if [ "${CHURN:-}" = 1 ] && [ "$i" -gt 1 ]; then TOKEN=$(auth); fi  # the bug: a token per call
  curl -sS -o /dev/null "$BASE/v2/things" -H "Authorization: Bearer $TOKEN" -w "call $i -> %{http_code}\n"
done
# The verdicts of the Python assertions; any finding fails this run (none is expected).
VERDICT=$(curl -sS "$BASE/_mgmtauth/check")
if ! printf '%s' "$VERDICT" | grep -q '"ok": true'; then
  printf '%s\n' "$VERDICT" | grep -o '"kind": "[a-z_]*"' >&2
  curl -sS "$BASE/_mgmtauth/timeline" >&2
  exit 1
fi
echo "check: ok"
# --8<-- [end:check]
