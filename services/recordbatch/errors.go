package recordbatch

import "tidemark.io/services/platform/kerr"

// corruptf reports a batch whose bytes are damaged or malformed.
func corruptf(format string, args ...any) error {
	return kerr.New(kerr.CorruptMessage, format, args...)
}

// invalidf reports a well-formed batch whose contents are not acceptable.
func invalidf(format string, args ...any) error {
	return kerr.New(kerr.InvalidRecord, format, args...)
}
