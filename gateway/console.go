package gateway

import "net/http"

// consolePage holds the place of the web console, which the gateway will
// serve at /.
const consolePage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>tidemark</title></head>
<body>
<h1>tidemark</h1>
<p>The web console will be served here, by this gateway.</p>
<p>The REST API is under <code>/v1</code>; its OpenAPI document is at
<a href="/openapi.json">/openapi.json</a>. The gateway answers
<a href="/healthz">/healthz</a>.</p>
</body>
</html>
`

func serveConsole(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(consolePage))
}
