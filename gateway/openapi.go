package gateway

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
)

// generatedOpenAPI is generated from the protos and gateway.yaml (make
// generate).
//
//go:embed openapi/tidemark.swagger.json
var generatedOpenAPI []byte

// sessionOpenAPI describes the routes the gateway serves by hand, not from
// a proto: the console's login and logout.
//
//go:embed openapiextra/session.swagger.json
var sessionOpenAPI []byte

// openAPIDoc is the document /openapi.json serves: the generated one with
// the hand-written routes and definitions added.
var openAPIDoc = mustMergeOpenAPI(generatedOpenAPI, sessionOpenAPI)

// mustMergeOpenAPI adds extra's paths and definitions to base. A path or
// definition in both is a mistake in the embedded files: it panics at start.
func mustMergeOpenAPI(base, extra []byte) []byte {
	var doc, add map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		panic(fmt.Sprintf("generated OpenAPI document: %v", err))
	}
	if err := json.Unmarshal(extra, &add); err != nil {
		panic(fmt.Sprintf("hand-written OpenAPI routes: %v", err))
	}
	for _, section := range []string{"paths", "definitions"} {
		into, _ := doc[section].(map[string]any)
		if into == nil {
			into = map[string]any{}
			doc[section] = into
		}
		from, _ := add[section].(map[string]any)
		for k, v := range from {
			if _, dup := into[k]; dup {
				panic(fmt.Sprintf("OpenAPI %s %s is both generated and hand-written", section, k))
			}
			into[k] = v
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err)
	}
	return out
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
