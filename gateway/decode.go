package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"tidemark.io/services/platform/kerr"
)

// jsonMarshaler is grpc-gateway's protojson marshaler with tidemark's
// decoding of request bodies (errors name the bad field) and rendering of
// stream errors (the same errorBody as every other error).
type jsonMarshaler struct {
	runtime.JSONPb
	// maxObjects bounds the objects and arrays of a body; 0 is no bound.
	maxObjects int
}

func newJSONMarshaler() *jsonMarshaler {
	return &jsonMarshaler{JSONPb: runtime.JSONPb{
		MarshalOptions: protojson.MarshalOptions{EmitUnpopulated: true},
		// Unknown fields are refused: a misspelt option must not be
		// silently ignored.
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// NewDecoder reads request bodies.
func (m *jsonMarshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error { return m.decodeBody(r, v) })
}

func (m *jsonMarshaler) decodeBody(r io.Reader, v any) error {
	msg, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("cannot decode a request body into %T", v)
	}
	// The body is bounded by the limit middleware: reading it whole here
	// reads at most the limit.
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return io.EOF // no body: the empty request, as grpc-gateway has it
	}
	if n := countContainers(data, m.maxObjects); m.maxObjects > 0 && n > m.maxObjects {
		return &inputError{msg: fmt.Sprintf("request body has more than %d JSON objects and arrays (--http.max.json.objects); send fewer records per request", m.maxObjects)}
	}
	err = m.UnmarshalOptions.Unmarshal(data, msg)
	if err == nil {
		return nil
	}
	if !json.Valid(data) {
		return &inputError{msg: "request body is not valid JSON: " + syntaxError(data)}
	}
	if field, why, ok := locateBadField(msg.ProtoReflect().Descriptor(), data); ok {
		return &inputError{field: field, msg: why}
	}
	return &inputError{msg: protojsonReason(err)}
}

// countContainers counts the objects and arrays in a JSON text, outside
// strings, stopping past limit (a limit <= 0 counts them all). It allocates
// nothing: it runs before the body is decoded into messages.
func countContainers(data []byte, limit int) int {
	n, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			n++
			if limit > 0 && n > limit {
				return n
			}
		}
	}
	return n
}

// syntaxError says where the JSON went wrong.
func syntaxError(data []byte) string {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "malformed"
}

// Marshal renders grpc-gateway's stream error line ({"error": Status})
// as {"error": errorBody}; everything else as protojson.
func (m *jsonMarshaler) Marshal(v any) ([]byte, error) {
	if chunk, ok := v.(map[string]proto.Message); ok && len(chunk) == 1 {
		if st, ok := chunk["error"].(*spb.Status); ok {
			e := kerr.FromStatus(status.ErrorProto(st))
			return json.Marshal(map[string]errorBody{"error": bodyOf(e)})
		}
	}
	return m.JSONPb.Marshal(v)
}
