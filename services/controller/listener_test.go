package controller

import (
	"context"
	"errors"
	"net"
	"testing"
)

// Start takes a given listener over: when it fails, the listener is closed.
func TestStartClosesAGivenListenerWhenItFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ID = -1 // refused by Validate
	cfg.Listen = l.Addr().String()
	cfg.Listener = l
	if _, err := Start(context.Background(), cfg, nil); err == nil {
		t.Fatal("a controller with id -1 started")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on the given listener after a failed Start: %v, want it closed", err)
	}
}
