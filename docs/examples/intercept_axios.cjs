// An unchanged axios client: it hard-codes the service's hosts and knows nothing of
// the fake. Under interception, HTTPS_PROXY sends it to the fake's proxy (axios opens a
// CONNECT tunnel) and NODE_EXTRA_CA_CERTS makes Node trust the fake's test CA.
// Run by docs/examples/test_intercept.py with mgmt_server.env.
const axios = require("axios");

const form = (fields) => new URLSearchParams(fields).toString();
const bearer = (token) => ({ headers: { Authorization: `Bearer ${token}` } });

async function main() {
  const account = { username: process.env.MGMT_USERNAME, key: process.env.MGMT_API_KEY };
  const v2 = await axios.post("https://api.tealiumiq.com/v2/auth", form(account));
  const things = await axios.get("https://api.tealiumiq.com/v2/things", bearer(v2.data.token));
  const v3 = await axios.post(
    "https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main",
    form(account),
  );
  // v3 calls go to the host the auth answer names.
  const visitors = await axios.get(
    `https://${v3.data.host}/v3/things/accounts/acme/profiles/main`,
    bearer(v3.data.token),
  );
  console.log(JSON.stringify({ v2: things.data, v3: visitors.data, host: v3.data.host }));
}

main().catch((error) => {
  console.error(error.response ? [error.response.status, error.response.data] : error.message);
  process.exit(1);
});
