package assign

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The bytes below are laid out field by field from Kafka's
// ConsumerProtocolSubscription.json and ConsumerProtocolAssignment.json.
func TestSubscriptionBytesAreKafkas(t *testing.T) {
	s := Subscription{
		Topics:     []string{"t", "ab"},
		UserData:   []byte{0, 0, 0, 7},
		Owned:      []TopicPartitions{{Topic: "t", Partitions: []int32{0, 2}}},
		Generation: 5,
		Rack:       "r1",
	}
	want := unhex(t, `
		0003
		00000002 0001 74 0002 6162
		00000004 00000007
		00000001 0001 74 00000002 00000000 00000002
		00000005
		0002 7231`)
	if got := s.Encode(); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	back, err := DecodeSubscription(want)
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	// Null user data and rack.
	nulls := Subscription{Topics: []string{"t"}, Generation: -1}
	want = unhex(t, `0003 00000001 0001 74 ffffffff 00000000 ffffffff ffff`)
	if got := nulls.Encode(); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
}

func TestOlderSubscriptionVersionsDecode(t *testing.T) {
	for _, c := range []struct {
		name string
		hex  string
		want Subscription
	}{
		{"v0", `0000 00000001 0001 74 00000000`, Subscription{Topics: []string{"t"}, UserData: []byte{}, Generation: -1}},
		{"v1", `0001 00000001 0001 74 ffffffff 00000001 0001 74 00000001 00000003`,
			Subscription{Topics: []string{"t"}, Owned: []TopicPartitions{{"t", []int32{3}}}, Generation: -1}},
		{"v2", `0002 00000000 ffffffff 00000000 00000009`, Subscription{Generation: 9}},
		// A newer version's extra fields are ignored.
		{"v9", `0009 00000000 ffffffff 00000000 00000009 ffff 01020304`, Subscription{Generation: 9}},
	} {
		got, err := DecodeSubscription(unhex(t, c.hex))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestAssignmentBytesAreKafkas(t *testing.T) {
	a := Assignment{Partitions: []TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}
	want := unhex(t, `0003 00000001 0001 74 00000002 00000000 00000001 ffffffff`)
	if got := a.Encode(); !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%x\nwant\n%x", got, want)
	}
	v0 := unhex(t, `0000 00000001 0001 74 00000002 00000000 00000001 ffffffff`)
	if got, err := DecodeAssignment(v0); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if got, err := DecodeAssignment(nil); err != nil || len(got.Partitions) != 0 {
		t.Fatalf("empty assignment: %+v, %v", got, err)
	}
}

func TestMalformedIsAnError(t *testing.T) {
	good := Subscription{Topics: []string{"t"}, Owned: []TopicPartitions{{"t", []int32{1}}}, Generation: 1}.Encode()
	for i := 1; i < len(good); i++ {
		if _, err := DecodeSubscription(good[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("subscription cut at %d: %v", i, err)
		}
	}
	huge := unhex(t, `0000 7fffffff`)
	if _, err := DecodeSubscription(huge); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a count beyond the input: %v", err)
	}
	ga := Assignment{Partitions: []TopicPartitions{{"t", []int32{1}}}}.Encode()
	for i := 1; i < len(ga); i++ {
		if _, err := DecodeAssignment(ga[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("assignment cut at %d: %v", i, err)
		}
	}
}
