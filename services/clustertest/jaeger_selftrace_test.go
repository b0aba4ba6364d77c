package clustertest

import (
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"tidemark.io/services/platform/testenv"
)

// Jaeger's query extension traces itself by default, to the OTLP endpoint
// of its environment or else localhost:4317: in the dev cluster that is its
// own receiver, which wants mutual TLS, so every export failed and Jaeger
// logged a connection warning every few seconds to two minutes, for as long
// as it ran, idle or not. LocalJaegerConfig turns that off. An endpoint of
// the test's own counts Jaeger's attempts; Jaeger flushes its spans when
// it stops, so once it has exited every attempt it would make has been made.
func TestLocalJaegerDoesNotExportItsOwnSpans(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Jaeger binary")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			conn.Close()
		}
	}()
	j := newJaeger(t)
	j.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ln.Addr().String(), "OTEL_BSP_SCHEDULE_DELAY=10"}
	j.Start()
	for range 5 {
		resp, err := http.Get(j.API + "/api/services")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	stopJaegerGracefully(t, j, &dials)
	if n := dials.Load(); n > 0 {
		t.Fatalf("Jaeger dialled %d times to export its own spans; logs:\n%s", n, j.logs.String())
	}
}

// stopJaegerGracefully sends SIGTERM and waits, at most 30 s, for Jaeger to
// exit (flushing its spans on the way) or for a first export attempt.
func stopJaegerGracefully(t *testing.T, j *jaeger, dials *atomic.Int32) {
	t.Helper()
	if err := j.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = j.cmd.Wait(); close(exited) }()
	deadline := time.After(30 * time.Second)
	for dials.Load() == 0 {
		select {
		case <-exited:
			j.cmd = nil
			return
		case <-deadline:
			t.Fatalf("Jaeger neither exited nor exported within 30 s of SIGTERM; logs:\n%s", j.logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = j.cmd.Process.Kill()
	<-exited
	j.cmd = nil
}
