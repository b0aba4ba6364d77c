package loopback

import (
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

func TestFreeRangeIsBelowTheEphemeralRangeAndFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		base, err := FreeRange(rng, 50)
		if err != nil {
			t.Fatal(err)
		}
		if base < lowest || base+50 > ephemeralStart() {
			t.Fatalf("range %d-%d not within [%d, %d)", base, base+49, lowest, ephemeralStart())
		}
		for p := base; p < base+50; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d of the range is not free: %v", p, err)
			}
			l.Close()
		}
	}
}

func TestFreeRangeSkipsAHeldPort(t *testing.T) {
	// The same seed probes the same block first: with a port of it held,
	// that block must be passed over.
	base, err := FreeRange(rand.New(rand.NewPCG(7, 7)), 10)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+3)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	again, err := FreeRange(rand.New(rand.NewPCG(7, 7)), 10)
	if err != nil {
		t.Fatal(err)
	}
	if again == base {
		t.Fatalf("range from %d returned although port %d in it is held", base, base+3)
	}
}

func TestFreeAddr(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	if p, _ := strconv.Atoi(port); p < lowest || p >= ephemeralStart() {
		t.Fatalf("%s: port outside [%d, %d)", addr, lowest, ephemeralStart())
	}
	if _, err := FreeRange(rand.New(rand.NewPCG(0, 0)), 0); err == nil {
		t.Fatal("span 0 accepted")
	}
}

func TestListenHoldsAPortBelowTheEphemeralRange(t *testing.T) {
	l, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(p)
	if port < lowest || port >= ephemeralStart() {
		t.Fatalf("port %d not within [%d, %d)", port, lowest, ephemeralStart())
	}
	// Held: nobody else can bind it while the listener is open.
	if other, err := net.Listen("tcp", l.Addr().String()); err == nil {
		other.Close()
		t.Fatalf("%s could be bound again while held", l.Addr())
	}
}
