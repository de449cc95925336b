// The Java walkthrough of docs/languages.md (tests/standalone/test_languages.py runs it).
// Java 11+, no build tool, no packages: java Walkthrough.java
// Start the server first, in another terminal:
//
//   mgmtauth-server \
//     --account '{"username": "alice@example.com", "api_key": "s3cret+key&with=chars%/", "password": "pa55+word&"}' \
//     --route 'GET /v2/things'
//
// CHURN=1 java Walkthrough.java: a client that re-authenticates before every call, which
// /_mgmtauth/check reports, so the run fails.

import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class Walkthrough {
    // --8<-- [start:setup]
    static final String BASE = System.getenv().getOrDefault("BASE", "http://127.0.0.1:8765");
    static final String USERNAME = "alice@example.com";
    static final String API_KEY = "s3cret+key&with=chars%/";
    static final boolean CHURN = "1".equals(System.getenv("CHURN"));
    // Findings this run expects (none): any other one fails it.
    static final Set<String> EXPECTED = Set.of();
    static final HttpClient HTTP = HttpClient.newHttpClient();
    // --8<-- [end:setup]

    // --8<-- [start:auth]
    // Each value through URLEncoder: the + & = % of the key must not travel as they are.
    static String form(String... pairs) {
        StringBuilder body = new StringBuilder();
        for (int i = 0; i < pairs.length; i += 2) {
            if (body.length() > 0) body.append('&');
            body.append(pairs[i]).append('=')
                .append(URLEncoder.encode(pairs[i + 1], StandardCharsets.UTF_8));
        }
        return body.toString();
    }

    static String authenticate() throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(BASE + "/v2/auth"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .POST(HttpRequest.BodyPublishers.ofString(form("username", USERNAME, "key", API_KEY)))
            .build();
        HttpResponse<String> response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() != 200) {
            throw new IllegalStateException("/v2/auth " + response.statusCode() + ": " + response.body());
        }
        return field(response.body(), "token");
    }

    static int things(String token) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(BASE + "/v2/things"))
            .header("Authorization", "Bearer " + token)
            .build();
        HttpResponse<String> response = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
        System.out.println("GET /v2/things -> " + response.statusCode() + " " + response.body());
        return response.statusCode();
    }
    // --8<-- [end:auth]

    // No JSON library in the JDK: the few string fields we read, by pattern.
    static String field(String json, String name) {
        Matcher m = Pattern.compile("\"" + name + "\": \"((?:[^\"\\\\]|\\\\.)*)\"").matcher(json);
        if (!m.find()) throw new IllegalStateException("no " + name + " in " + json);
        return m.group(1);
    }

    static HttpResponse<String> get(String path) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create(BASE + path)).build();
        return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
    }

    public static void main(String[] args) throws Exception {
        // The control API takes JSON; a fresh state makes the check cover this run only.
        HttpRequest reset = HttpRequest.newBuilder(URI.create(BASE + "/_mgmtauth/reset"))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{}"))
            .build();
        HTTP.send(reset, HttpResponse.BodyHandlers.ofString());

        // --8<-- [start:reuse]
        // One token for every call; a new one only near its expiry (the JWT's exp claim).
        String token = authenticate();
        for (int call = 0; call < 3; call++) {
            if (CHURN && call > 0) token = authenticate(); // the bug: a token per call
            if (things(token) != 200) System.exit(1);
        }
        // --8<-- [end:reuse]

        // --8<-- [start:check]
        // The verdicts of the Python assertions, for this run: fail on a finding not
        // expected. Each finding has a kind; the text timeline tells the whole story.
        String verdict = get("/_mgmtauth/check").body();
        Matcher kinds = Pattern.compile("\"kind\": \"([a-z_]+)\"").matcher(verdict);
        boolean failed = false;
        while (kinds.find()) {
            if (!EXPECTED.contains(kinds.group(1))) {
                System.err.println("finding: " + kinds.group(1));
                failed = true;
            }
        }
        if (failed) {
            System.err.println(get("/_mgmtauth/timeline").body());
            System.exit(1);
        }
        System.out.println("check: ok " + verdict);
        // --8<-- [end:check]
    }
}
