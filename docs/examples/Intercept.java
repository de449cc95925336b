// An unchanged Java client (java.net.http): it hard-codes the service's hosts and knows
// nothing of the fake. Under interception the JVM's proxy and trust store system
// properties send it to the fake's proxy (a CONNECT tunnel) and make it trust the test
// CA: see docs/hosts.md. Run by docs/examples/test_intercept.py.
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class Intercept {
    static final HttpClient HTTP = HttpClient.newHttpClient(); // the default ProxySelector

    static String field(String json, String name) {
        Matcher m = Pattern.compile("\"" + name + "\"\\s*:\\s*\"([^\"]*)\"").matcher(json);
        if (!m.find()) throw new IllegalStateException("no " + name + " in " + json);
        return m.group(1);
    }

    static String send(HttpRequest request) throws Exception {
        HttpResponse<String> answer = HTTP.send(request, HttpResponse.BodyHandlers.ofString());
        if (answer.statusCode() != 200) {
            throw new IllegalStateException(answer.statusCode() + " " + answer.body());
        }
        return answer.body();
    }

    static String post(String url, String form) throws Exception {
        return send(HttpRequest.newBuilder(URI.create(url))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .POST(HttpRequest.BodyPublishers.ofString(form)).build());
    }

    static String get(String url, String token) throws Exception {
        return send(HttpRequest.newBuilder(URI.create(url))
                .header("Authorization", "Bearer " + token).GET().build());
    }

    public static void main(String[] args) throws Exception {
        String form = "username=" + URLEncoder.encode(System.getenv("MGMT_USERNAME"), StandardCharsets.UTF_8)
                + "&key=" + URLEncoder.encode(System.getenv("MGMT_API_KEY"), StandardCharsets.UTF_8);
        String v2 = post("https://api.tealiumiq.com/v2/auth", form);
        String things = get("https://api.tealiumiq.com/v2/things", field(v2, "token"));
        String v3 = post("https://platform.tealiumapis.com/v3/auth/accounts/acme/profiles/main", form);
        String host = field(v3, "host"); // v3 calls go to the host the auth answer names
        String visitors = get("https://" + host + "/v3/things/accounts/acme/profiles/main", field(v3, "token"));
        System.out.println(things + " " + visitors + " " + host);
    }
}
