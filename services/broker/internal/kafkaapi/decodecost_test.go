package kafkaapi

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFrame frames a body for key and version as a client does.
func rawFrame(key, version int16, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	b = append(b, 0)                             // header tags (flexible versions below)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// craftedTopics is a flexible body of size bytes whose topics count,
// after prefix, is half of what follows, with nothing of them behind it.
func craftedTopics(prefix []byte, size int) []byte {
	b := append([]byte(nil), prefix...)
	b = binary.AppendUvarint(b, uint64((size-len(b)-5)/2))
	return append(b, make([]byte, size-len(b))...)
}

// allocated is what f allocated, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sendAndWaitClosed writes f on a listener connection and waits for the
// broker to close it unanswered.
func sendAndWaitClosed(t *testing.T, s *Server, f []byte) {
	t.Helper()
	server, client := net.Pipe()
	c := s.newConn(server, Listener{})
	served := make(chan struct{})
	go func() { defer close(served); c.serve() }()
	defer func() { client.Close(); <-served }()
	_ = client.SetDeadline(time.Now().Add(20 * time.Second))
	go func() { _, _ = client.Write(f) }()
	if _, _, err := readAnswer(t, client); !errors.Is(err, io.EOF) {
		t.Fatalf("answer to the crafted request: %v; want the connection closed", err)
	}
}

// A request whose array count claims what its bytes do not hold is closed
// before kmsg allocates the count's elements: an 8 MiB OffsetCommit or
// Produce whose topics count is half its length allocated 256 MiB (32
// times its size) before failing, and at socket.request.max.bytes each
// connection could make the broker allocate gigabytes.
func TestACraftedArrayCountIsRefusedBeforeItIsAllocated(t *testing.T) {
	const size = 8 << 20
	s := New(Options{Limits: Limits{MaxRequestBytes: 64 << 20}})
	s.table[int16(kmsg.OffsetCommit)] = api{versions: VersionRange{8, 8}}
	for _, tc := range []struct {
		name string
		f    []byte
	}{
		// group "", generation 0, member "", instance null, then topics
		{"OffsetCommit v8", rawFrame(int16(kmsg.OffsetCommit), 8, craftedTopics([]byte{1, 0, 0, 0, 0, 1, 0}, size))},
		// transactional id null, acks, timeout, then topics
		{"Produce v9", rawFrame(int16(kmsg.Produce), 9, craftedTopics([]byte{0, 0xff, 0xff, 0, 0, 0x75, 0x30}, size))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := allocated(func() { sendAndWaitClosed(t, s, tc.f) })
			// The body itself, read in doubling chunks, is about twice its size.
			if n > 4*size {
				t.Fatalf("the %d-byte request allocated %d MiB before it was refused; want under %d MiB", len(tc.f), n>>20, 4*size>>20)
			}
			t.Logf("%d MiB request: %d MiB allocated", len(tc.f)>>20, n>>20)
		})
	}
}

// A request other than Produce is at most 1 MiB, and its decoding, at
// most decodeAmplification times that, is counted with its body in what
// its connection holds read ahead.
func TestDecodingARequestWithoutRecordsIsBoundedAndCounted(t *testing.T) {
	s := New(Options{Limits: Limits{MaxRequestBytes: 64 << 20}})
	s.table[int16(kmsg.OffsetCommit)] = api{versions: VersionRange{8, 8}}
	c := s.newConn(nil, Listener{})
	commit := func(topics int) []byte {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(8)
		for range topics {
			topic := kmsg.NewOffsetCommitRequestTopic()
			topic.Partitions = append(topic.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
			req.Topics = append(req.Topics, topic)
		}
		return frame(req, 1)[4:]
	}
	body := commit(maxRequestBytesWithoutRecords / 24)
	var (
		p   *pending
		err error
	)
	n := allocated(func() { p, _, _, err = c.decode(body) })
	if err != nil {
		t.Fatalf("decoding an OffsetCommit of %d bytes: %v", len(body), err)
	}
	if n > uint64(p.cost) {
		t.Fatalf("decoding %d bytes allocated %d; it is counted at %d", len(body), n, p.cost)
	}
	t.Logf("%d bytes decoded: %d allocated, counted at %d", len(body), n, p.cost)
	if over := commit(maxRequestBytesWithoutRecords/16 + 1); len(over) <= maxRequestBytesWithoutRecords {
		t.Fatalf("test request of %d bytes", len(over))
	} else if _, _, _, err := c.decode(over); err == nil {
		t.Fatalf("an OffsetCommit of %d bytes was decoded; want it refused", len(over))
	}
}

// A Produce of one 8 MiB batch, at a socket.request.max.bytes above it,
// is decoded, costing about its size: record data is copied, not
// multiplied.
func TestALargeProduceBatchIsStillDecoded(t *testing.T) {
	s := New(Options{Limits: Limits{MaxRequestBytes: 16 << 20}})
	c := s.newConn(nil, Listener{})
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 30000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "t"
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = make([]byte, 8<<20)
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	body := frame(req, 1)[4:]
	var (
		p   *pending
		got kmsg.Request
		err error
	)
	n := allocated(func() { p, _, got, err = c.decode(body) })
	if err != nil {
		t.Fatalf("decoding an 8 MiB Produce: %v", err)
	}
	if r := got.(*kmsg.ProduceRequest); len(r.Topics) != 1 || len(r.Topics[0].Partitions[0].Records) != 8<<20 {
		t.Fatalf("decoded %+v", r.Topics)
	}
	if n > 2*uint64(len(body)) || p.cost > 1<<10 {
		t.Fatalf("decoding %d bytes allocated %d and was counted at %d more", len(body), n, p.cost)
	}
}

// A request other than the SASL exchange's sent before login is closed
// before its body is decoded, as Kafka's authenticator does: a 500 KiB
// Fetch of topics with one tagged field each made an unauthenticated
// client's connection allocate 40 MiB (80 times its size).
func TestARequestBeforeLoginIsClosedUndecoded(t *testing.T) {
	_, addr := serveSASL(t, SASLOptions{})
	const topics = 100 << 10
	body := make([]byte, 25) // replica, wait, min and max bytes, isolation, session
	body = binary.AppendUvarint(body, topics+1)
	for range topics {
		body = append(body, 1, 1, 1, 0, 0) // name "", no partitions, one empty tag
	}
	body = append(body, 1, 1, 0) // no forgotten topics, rack "", no tags
	f := rawFrame(int16(kmsg.Fetch), 12, body)
	c := dial(t, addr)
	n := allocated(func() {
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	})
	if n > 8<<20 {
		t.Fatalf("a %d KiB Fetch before login allocated %d MiB; want it closed undecoded", len(f)>>10, n>>20)
	}
	t.Logf("%d KiB Fetch before login: %d KiB allocated", len(f)>>10, n>>10)
}

// The Produce walk reads every version served as kmsg does: what kmsg
// decodes it accepts, counting at least what kmsg allocates beyond the
// body, and what kmsg finds short it refuses.
func TestTheProduceWalkAgreesWithKmsg(t *testing.T) {
	for v := int16(3); v <= 11; v++ {
		for _, topics := range []int{50, 20000} {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(v)
			id := "tx"
			req.TransactionID = &id
			for i := range topics {
				topic := kmsg.NewProduceRequestTopic()
				topic.Topic = "topic"
				for j := range i % 4 {
					part := kmsg.NewProduceRequestTopicPartition()
					part.Partition = int32(j)
					if j%2 == 0 {
						part.Records = make([]byte, 100*j)
					}
					if v >= 9 {
						part.UnknownTags.Set(uint32(j+1), []byte{1, 2})
					}
					topic.Partitions = append(topic.Partitions, part)
				}
				if v >= 9 && i%3 == 0 {
					topic.UnknownTags.Set(7, nil)
					topic.UnknownTags.Set(8, []byte{3})
				}
				req.Topics = append(req.Topics, topic)
			}
			body := req.AppendTo(nil)
			cost, err := decodeCost(int16(kmsg.Produce), v, body, 64<<20)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			got := kmsg.NewPtrProduceRequest()
			got.SetVersion(v)
			var decodeErr error
			n := allocated(func() { decodeErr = got.ReadFrom(body) })
			if decodeErr != nil {
				t.Fatalf("v%d: kmsg: %v", v, decodeErr)
			}
			// Allocation of the small one is mostly noise (size classes);
			// under -race kmsg's arrays are allocated twice (measured).
			if topics > 50 && n > 2*uint64(cost)+uint64(len(body)) {
				t.Fatalf("v%d: decoding %d bytes allocated %d; counted at %d plus the body", v, len(body), n, cost)
			}
			t.Logf("v%d: %d bytes: %d allocated, counted at %d", v, len(body), n, cost)
			for _, short := range []int{1, len(body) / 2, len(body) - 1} {
				if _, err := decodeCost(int16(kmsg.Produce), v, body[:short], 64<<20); err == nil {
					t.Fatalf("v%d: a body cut at %d of %d bytes was walked", v, short, len(body))
				}
			}
		}
	}
}
