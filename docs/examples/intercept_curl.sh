#!/usr/bin/env bash
# Unchanged curl commands with the service's hard-coded hosts. Under interception,
# https_proxy sends them to the fake's proxy and CURL_CA_BUNDLE makes curl trust the
# test CA: run with mgmt_server.env (docs/hosts.md). Run by docs/examples/test_intercept.py.
set -euo pipefail

token=$(curl -sS --fail-with-body \
  --data-urlencode "username=$MGMT_USERNAME" --data-urlencode "key=$MGMT_API_KEY" \
  https://api.tealiumiq.com/v2/auth | sed -E 's/.*"token": *"([^"]+)".*/\1/')
curl -sS --fail-with-body -H "Authorization: Bearer $token" https://api.tealiumiq.com/v2/things
echo

v3=$(curl -sS --fail-with-body \
  --data-urlencode "username=$MGMT_USERNAME" --data-urlencode "key=$MGMT_API_KEY" \
  https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main)
token=$(sed -E 's/.*"token": *"([^"]+)".*/\1/' <<<"$v3")
host=$(sed -E 's/.*"host": *"([^"]+)".*/\1/' <<<"$v3")
# v3 calls go to the host the auth answer names.
curl -sS --fail-with-body -H "Authorization: Bearer $token" \
  "https://$host/v3/things/accounts/acme/profiles/main"
echo
