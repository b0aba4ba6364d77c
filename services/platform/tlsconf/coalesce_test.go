package tlsconf_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/credentials"

	"tidemark.io/services/platform/pki"
	"tidemark.io/services/platform/tlsconf"
)

// countingConn counts the writes to the socket.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// writeOnce opens a TLS connection with the given client credentials to a
// tidemark TLS server, makes one Write of payload and returns the socket
// writes it took; the server checks it read the payload intact.
func writeOnce(t *testing.T, client credentials.TransportCredentials, server credentials.TransportCredentials, payload []byte) int64 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	got := make(chan error, 1)
	go func() {
		raw, err := lis.Accept()
		if err != nil {
			got <- err
			return
		}
		conn, _, err := server.ServerHandshake(raw)
		if err != nil {
			got <- err
			return
		}
		defer conn.Close()
		buf := make([]byte, len(payload))
		if _, err := io.ReadFull(conn, buf); err != nil {
			got <- err
			return
		}
		if !bytes.Equal(buf, payload) {
			got <- io.ErrUnexpectedEOF
			return
		}
		got <- nil
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	conn, _, err := client.ClientHandshake(context.Background(), "127.0.0.1", countingConn{raw, &writes})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := writes.Load()
	if n, err := conn.Write(payload); err != nil || n != len(payload) {
		t.Fatalf("write: %d %v", n, err)
	}
	n := writes.Load() - before
	if err := <-got; err != nil {
		t.Fatalf("the server did not read the payload intact: %v", err)
	}
	return n
}

// One Write of 256 KiB leaves as one socket write, where crypto/tls alone
// writes each record of at most 16 KiB on its own; the bytes arrive intact.
func TestCoalescedTLSWritesOnce(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Ensure(dir, pki.Leaf{Name: "broker-1"}, pki.Leaf{Name: "broker-2"}); err != nil {
		t.Fatal(err)
	}
	server, err := pki.Options(dir, "broker-1").ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.Options(dir, "broker-2").Client()
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	plain := writeOnce(t, credentials.NewTLS(cfg.Clone()), server, payload)
	if plain < int64(len(payload)/(16<<10)) {
		t.Fatalf("control: crypto/tls alone made %d socket writes for %d KiB; the test no longer sees what it checks", plain, len(payload)>>10)
	}
	if coalesced := writeOnce(t, tlsconf.Credentials(cfg.Clone()), server, payload); coalesced != 1 {
		t.Fatalf("coalesced: %d socket writes for one Write of %d KiB, want 1 (plain crypto/tls: %d)", coalesced, len(payload)>>10, plain)
	}
	t.Logf("one Write of %d KiB: %d socket writes with crypto/tls alone, 1 coalesced", len(payload)>>10, plain)
}
