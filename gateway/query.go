package gateway

import (
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// queryParser fills requests from query parameters as grpc-gateway's
// default parser does, but refuses unknown parameters (the default ignores
// them, so ?offest=5 would read from 0) and names the parameter at fault.
type queryParser struct{}

var mapKeySyntax = regexp.MustCompile(`^(.*)\[.*\]$`)

func (queryParser) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range values {
			if !yield(k) {
				return
			}
		}
	})
	md := msg.ProtoReflect().Descriptor()
	seen := map[string]string{}
	for _, key := range keys {
		path, ok := queryField(md, key)
		if !ok {
			return &inputError{field: key, msg: "unknown query parameter"}
		}
		if filter != nil && filter.HasCommonPrefix(strings.Split(path, ".")) {
			// The default parser skips a field the path or body gives,
			// so ?partition=5 on .../partitions/0/... would read 0.
			return &inputError{field: key, msg: "is given by the URL path or the body, not a query parameter"}
		}
		if other, dup := seen[path]; dup {
			return &inputError{field: key, msg: "names the same field as " + other}
		}
		seen[path] = key
	}
	var def runtime.DefaultQueryParser
	for _, key := range keys {
		if err := def.Parse(msg, url.Values{key: values[key]}, filter); err != nil {
			return &inputError{field: key, msg: err.Error()}
		}
	}
	return nil
}

// queryField resolves a query key (proto or JSON names, dotted through
// singular messages, map[key] syntax) to its field path.
func queryField(md protoreflect.MessageDescriptor, key string) (string, bool) {
	if m := mapKeySyntax.FindStringSubmatch(key); m != nil {
		key = m[1]
	}
	parts := strings.Split(key, ".")
	names := make([]string, 0, len(parts))
	for i, part := range parts {
		fd := fieldByKey(md, part)
		if fd == nil {
			return "", false
		}
		names = append(names, string(fd.Name()))
		if i == len(parts)-1 {
			break
		}
		if fd.Message() == nil || fd.IsList() || fd.IsMap() {
			return "", false
		}
		md = fd.Message()
	}
	return strings.Join(names, "."), true
}
