package broker_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"tidemark.io/services/broker"
)

// Start takes a given listener over: when it fails, the listener is closed
// (a caller cannot use it again by mistake, and the port is not leaked).
func TestStartClosesAGivenListenerWhenItFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := broker.DefaultConfig()
	cfg.ID = -1 // refused by Validate
	cfg.Listen = l.Addr().String()
	cfg.Listener = l
	if _, err := broker.Start(context.Background(), cfg, nil); err == nil {
		t.Fatal("a broker with id -1 started")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on the given listener after a failed Start: %v, want it closed", err)
	}
}
