package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// member is one "key": value pair of a JSON object, in document order.
type member struct {
	key string
	raw json.RawMessage
}

// locateBadField finds the member of a JSON body (valid JSON that protojson
// refused for md) that is at fault, as a path such as
// "records.records[2].value", and why. protojson names at most the leaf
// field, without the path to it, so this narrows down by decoding parts:
// the first key whose addition fails, then within it.
func locateBadField(md protoreflect.MessageDescriptor, data []byte) (field, why string, ok bool) {
	return locateIn(md, data, "")
}

func locateIn(md protoreflect.MessageDescriptor, data []byte, path string) (string, string, bool) {
	members, err := objectMembers(data)
	if err != nil {
		return orBody(path), "must be a JSON object", true
	}
	for i, m := range members {
		err := decodeMembers(md, members[:i+1])
		if err == nil {
			continue
		}
		p := joinPath(path, m.key)
		fd := fieldByKey(md, m.key)
		if fd == nil {
			return p, "unknown field" + knownFields(md), true
		}
		// Fine alone but not with the earlier members: a oneof set twice,
		// or a field given under both its names.
		if decodeMembers(md, []member{m}) == nil {
			return p, protojsonReason(err), true
		}
		if sub, why, ok := locateWithin(fd, m, p); ok {
			return sub, why, true
		}
		return p, protojsonReason(err), true
	}
	return "", "", false
}

// locateWithin looks for the fault inside a nested message or a list.
func locateWithin(fd protoreflect.FieldDescriptor, m member, path string) (string, string, bool) {
	nested := fd.Message() != nil && !fd.IsMap() && !strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.")
	switch {
	case fd.IsList():
		var elems []json.RawMessage
		if json.Unmarshal(m.raw, &elems) != nil {
			return "", "", false
		}
		for i, e := range elems {
			p := fmt.Sprintf("%s[%d]", path, i)
			if nested {
				if sub, why, ok := locateIn(fd.Message(), e, p); ok {
					return sub, why, true
				}
				continue
			}
			one, _ := json.Marshal([]json.RawMessage{e})
			if err := decodeMembers(fd.ContainingMessage(), []member{{m.key, one}}); err != nil {
				return p, protojsonReason(err), true
			}
		}
	case nested:
		return locateIn(fd.Message(), m.raw, path)
	}
	return "", "", false
}

// objectMembers lists the members of a JSON object in document order.
func objectMembers(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, member{key, raw})
	}
	return out, nil
}

// decodeMembers decodes an object made of the given members into a fresh
// message of type md.
func decodeMembers(md protoreflect.MessageDescriptor, members []member) error {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(m.raw)
	}
	buf.WriteByte('}')
	return protojson.Unmarshal(buf.Bytes(), dynamicpb.NewMessage(md))
}

// fieldByKey finds the field a JSON key names: its JSON name or its proto name.
func fieldByKey(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	fields := md.Fields()
	if fd := fields.ByJSONName(key); fd != nil {
		return fd
	}
	return fields.ByTextName(key)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// knownFields names the JSON fields md takes, for an unknown field's error:
// the caller sees what it may have meant ("; the fields here are topics,
// validateOnly, timeoutMs").
func knownFields(md protoreflect.MessageDescriptor) string {
	fields := md.Fields()
	if fields.Len() == 0 {
		return "; this body takes no fields"
	}
	names := make([]string, 0, fields.Len())
	for i := range fields.Len() {
		names = append(names, fields.Get(i).JSONName())
	}
	return "; the fields here are " + strings.Join(names, ", ")
}
