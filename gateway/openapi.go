package gateway

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is generated from the protos and gateway.yaml (make generate).
//
//go:embed openapi/tidemark.swagger.json
var openAPIDoc []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
