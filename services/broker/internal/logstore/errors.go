package logstore

import (
	"errors"
	"fmt"

	"tidemark.io/services/platform/kerr"
)

// storageErr is a failed disk operation: KAFKA_STORAGE_ERROR naming the file
// and what was being done, with the cause kept in the chain.
func storageErr(cause error, format string, args ...any) error {
	return fmt.Errorf("%w: %w", kerr.New(kerr.KafkaStorageError, format, args...), cause)
}

// ErrClosed is returned by operations on a closed Log or Manager.
var ErrClosed = errors.New("logstore: closed")

func outOfRange(format string, args ...any) error {
	return kerr.New(kerr.OffsetOutOfRange, format, args...)
}
