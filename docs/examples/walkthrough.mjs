// The Node walkthrough of docs/languages.md (tests/standalone/test_languages.py runs it).
// Node 18+ (built-in fetch), no packages. Start the server first, in another terminal:
//
//   mgmtauth-server \
//     --account '{"username": "alice@example.com", "api_key": "s3cret+key&with=chars%/", "password": "pa55+word&"}' \
//     --route 'GET /v2/things'
//
// then: node walkthrough.mjs   (CHURN=1 node walkthrough.mjs: a client that re-authenticates
// before every call, which /_mgmtauth/check reports, so the run fails)

// --8<-- [start:setup]
const BASE = process.env.BASE ?? "http://127.0.0.1:8765";
const USERNAME = "alice@example.com";
const API_KEY = "s3cret+key&with=chars%/";
const CHURN = process.env.CHURN === "1";
// Findings this run expects (none): any other one fails it.
const EXPECTED = new Set();
// --8<-- [end:setup]

// --8<-- [start:control]
// The control API takes JSON; a fresh state makes /_mgmtauth/check cover this run only.
async function control(path, body) {
  const response = await fetch(`${BASE}/_mgmtauth${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body ?? {}),
  });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}
// --8<-- [end:control]

// --8<-- [start:auth]
// URLSearchParams encodes the + & = % of the key and sets the form Content-Type.
// A template string (`username=${USERNAME}&key=${API_KEY}`) would send it as it is.
async function authenticate() {
  const response = await fetch(`${BASE}/v2/auth`, {
    method: "POST",
    body: new URLSearchParams({ username: USERNAME, key: API_KEY }),
  });
  const answer = await response.json();
  if (response.status !== 200) throw new Error(`/v2/auth ${response.status}: ${answer.message}`);
  return answer.token;
}

async function things(token) {
  const response = await fetch(`${BASE}/v2/things`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  console.log(`GET /v2/things -> ${response.status}`, await response.json());
  return response.status;
}
// --8<-- [end:auth]

await control("/reset");

// --8<-- [start:reuse]
// One token for every call; a new one only near its expiry (the JWT's exp claim).
let token = await authenticate();
for (let call = 0; call < 3; call++) {
  if (CHURN && call > 0) token = await authenticate(); // the bug: a token per call
  if ((await things(token)) !== 200) process.exit(1);
}
// --8<-- [end:reuse]

// --8<-- [start:check]
// The verdicts of the Python assertions, for this run: fail on any finding not expected.
const verdict = await (await fetch(`${BASE}/_mgmtauth/check`)).json();
const unexpected = verdict.findings.filter((f) => !EXPECTED.has(f.kind));
if (unexpected.length > 0) {
  for (const finding of unexpected) console.error(`${finding.kind}: ${finding.message}\n`);
  process.exit(1);
}
console.log("check: ok", verdict.counts);
// --8<-- [end:check]
