package replica

import "testing"

// A fetch round trip's cut cancels its stream only while the exchange waits
// on it: cut before, the exchange is not sent; cut after the answer came, the
// stream (which the next round trip reuses) is left alone. The trip is reused
// round after round, and a cut of one never reaches the next.
func TestFetchTripCutsTheStreamOnlyWhileArmed(t *testing.T) {
	f := &fetcher{}
	cancels := 0
	cancel := func() { cancels++ }

	trip, _ := f.beginTrip(0)
	if !trip.arm(cancel) {
		t.Fatal("a fresh trip refused to arm")
	}
	f.cut() // same generation: nothing to cut
	if trip.disarm() || cancels != 0 {
		t.Fatalf("an uncut trip: disarm reported a cut, or the stream was cancelled %d times", cancels)
	}
	f.endTrip()

	// Cut while waiting: the stream is cancelled and the answer discarded.
	trip, _ = f.beginTrip(0)
	trip.arm(cancel)
	f.gen++
	f.cut()
	if cancels != 1 || !trip.disarm() {
		t.Fatalf("cut while armed: stream cancelled %d times, want 1, and the trip must report the cut", cancels)
	}
	f.endTrip()

	// Cut after the answer came: the stream stays.
	trip, _ = f.beginTrip(f.gen)
	trip.arm(cancel)
	if trip.disarm() {
		t.Fatal("the trip after a cut one reported a cut")
	}
	f.gen++
	f.cut()
	if cancels != 1 {
		t.Fatalf("a cut after the answer cancelled the stream (%d cancels)", cancels)
	}
	f.endTrip()

	// Cut before it was sent: it is not armed, and nothing is cancelled.
	trip, _ = f.beginTrip(f.gen)
	f.gen++
	f.cut()
	if trip.arm(cancel) || cancels != 1 {
		t.Fatalf("a trip cut before it was sent armed, or cancelled the stream (%d cancels)", cancels)
	}
	f.endTrip()
	if _, ok := f.beginTrip(f.gen - 1); ok {
		t.Fatal("a trip built from an older partition set was begun")
	}
}
