package gateway

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"tidemark.io/services/platform/kerr"
)

// inputError is a bad value in the request itself, found before any call:
// in the JSON body, a path parameter or a query parameter. The generated
// handlers turn decoder and query parser errors into InvalidArgument
// statuses by their text alone ("%v"), so the field travels in the text
// and inputErrorOf reads it back.
type inputError struct {
	field string // as the caller wrote it, e.g. records.records[2].value; "" for none
	msg   string
}

func (e *inputError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return "invalid field " + strconv.Quote(e.field) + ": " + e.msg
}

var (
	// Our own inputError text.
	ownInputText = regexp.MustCompile(`(?s)^invalid field ("(?:[^"\\]|\\.)*"): (.*)$`)
	// The generated handlers' path parameter errors.
	pathTypeText    = regexp.MustCompile(`(?s)^type mismatch, parameter: ([^,]+), error: (.*)$`)
	pathMissingText = regexp.MustCompile(`^missing parameter (\S+)$`)
)

// inputErrorOf turns the text of a local InvalidArgument status into
// INVALID_REQUEST naming the bad field when the text names one.
func inputErrorOf(text string) *kerr.Error {
	if m := ownInputText.FindStringSubmatch(text); m != nil {
		if field, err := strconv.Unquote(m[1]); err == nil {
			return &kerr.Error{Code: kerr.InvalidRequest, Field: field, Message: field + ": " + plainReason(m[2])}
		}
	}
	if m := pathTypeText.FindStringSubmatch(text); m != nil {
		return &kerr.Error{Code: kerr.InvalidRequest, Field: m[1], Message: fmt.Sprintf("%s: %s", m[1], plainReason(m[2]))}
	}
	if m := pathMissingText.FindStringSubmatch(text); m != nil {
		return &kerr.Error{Code: kerr.InvalidRequest, Field: m[1], Message: m[1] + ": missing"}
	}
	return kerr.New(kerr.InvalidRequest, "%s", text)
}

var (
	// The query parser's own prefix, which repeats the field's name.
	parsingFieldText = regexp.MustCompile(`^parsing field "[^"]*": `)
	// Go's number and bool parse errors, which say how Go failed rather
	// than what the caller sent wrong.
	strconvText = regexp.MustCompile(`^strconv\.Parse(Int|Uint|Float|Bool): parsing ("(?:[^"\\]|\\.)*"): (invalid syntax|value out of range)$`)
)

// plainReason says a parameter's fault in the caller's terms: `"abc" is
// not a whole number`, not `parsing field "offset": strconv.ParseInt:
// parsing "abc": invalid syntax`.
func plainReason(reason string) string {
	reason = parsingFieldText.ReplaceAllString(reason, "")
	m := strconvText.FindStringSubmatch(reason)
	if m == nil {
		return reason
	}
	if m[3] == "value out of range" {
		return m[2] + " is out of range"
	}
	switch m[1] {
	case "Int":
		return m[2] + " is not a whole number"
	case "Uint":
		return m[2] + " is not a whole number of 0 or more"
	case "Float":
		return m[2] + " is not a number"
	}
	return m[2] + " is not true or false"
}

var protojsonNoise = regexp.MustCompile(`^proto:\s*|\(line \d+:\d+\):\s*`)

// protojsonReason strips protojson's prefix and the position within a
// fragment (which would mislead: it is not the caller's position).
func protojsonReason(err error) string {
	reason := strings.TrimSpace(protojsonNoise.ReplaceAllString(err.Error(), ""))
	if surrogateText.MatchString(reason) {
		return "a \\u escape in a string is half of a UTF-16 surrogate pair, which is not text"
	}
	return reason
}

// surrogateText is how protojson refuses a string whose \u escape is a lone
// surrogate. Every caller has checked that the body is valid JSON, which
// leaves no other cause for either: the text named a truncated body, or
// quoted the bytes after the escape as an escape code.
var surrogateText = regexp.MustCompile(`^(unexpected EOF|syntax error invalid escape code .*)$`)
