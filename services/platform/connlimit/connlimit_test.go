package connlimit

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve accepts on lis and keeps every accepted connection, reporting each.
func serve(t *testing.T, lis net.Listener) <-chan net.Conn {
	t.Helper()
	got := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				close(got)
				return
			}
			got <- c
		}
	}()
	return got
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedRead says whether the server closed c without a byte: a refused
// connection reads EOF (or a reset).
func refusedRead(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && (errors.Is(err, io.EOF) || !(errors.As(err, &ne) && ne.Timeout()))
}

func TestRefusesTheConnectionOverThePerIPLimit(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []string
	lis := Wrap(raw, Options{PerIP: 2, Refused: func(ip string, limit int) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, ip)
		if limit != 2 {
			t.Errorf("refused with limit %d, want 2", limit)
		}
	}}).(*Listener)
	defer lis.Close()
	accepted := serve(t, lis)

	a, b := dial(t, lis.Addr().String()), dial(t, lis.Addr().String())
	first, second := <-accepted, <-accepted
	third := dial(t, lis.Addr().String())
	if !refusedRead(third) {
		t.Fatal("the third connection from 127.0.0.1 was not closed")
	}
	if n := lis.Open("127.0.0.1"); n != 2 {
		t.Fatalf("open connections = %d, want 2 (the refused one is not counted)", n)
	}
	mu.Lock()
	if len(refused) != 1 || refused[0] != "127.0.0.1" {
		t.Fatalf("refused = %v, want [127.0.0.1]", refused)
	}
	mu.Unlock()
	// The accepted ones still work.
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(first, buf); err != nil || buf[0] != 'x' {
		t.Fatalf("first connection read %q, %v", buf, err)
	}
	_ = b

	// Closing one frees its slot.
	second.Close()
	fourth := dial(t, lis.Addr().String())
	c := <-accepted
	if _, err := fourth.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'y' {
		t.Fatalf("fourth connection read %q, %v", buf, err)
	}
}

func TestOverrideZeroRefusesAnAddress(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ov, err := ParseOverrides("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := Wrap(raw, Options{PerIP: 100, Overrides: ov})
	defer lis.Close()
	serve(t, lis)
	if !refusedRead(dial(t, lis.Addr().String())) {
		t.Fatal("127.0.0.1 with override 0 was let in")
	}
}

func TestParseOverrides(t *testing.T) {
	got, err := ParseOverrides(" 127.0.0.1:200, ::1:5 ,[fe80::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["127.0.0.1"] != 200 || got["::1"] != 5 || got["fe80::1"] != 0 {
		t.Fatalf("ParseOverrides = %v", got)
	}
	for in, want := range map[string]string{
		"localhost:5":   `"localhost" in "localhost:5" is not an IP address`,
		"127.0.0.1":     `"127.0.0.1" is not ip:limit`,
		"10.0.0.1:-1":   `limit "-1" of 10.0.0.1 is not a whole number >= 0`,
		"10.0.0.1:many": `limit "many" of 10.0.0.1`,
		"5":             `"5" is not ip:limit`,
	} {
		_, err := ParseOverrides(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseOverrides(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestNoLimitIsThePlainListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if Wrap(raw, Options{}) != raw {
		t.Fatal("Wrap without limits should return the listener itself")
	}
}
