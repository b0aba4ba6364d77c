package replica

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/broker/internal/partition"
)

// An ISR change the sender still holds when it stops (the broker shutting
// down while the controller is unreachable) ends its span with an error
// saying why, as does one queued after it stopped: a span never ended is
// never exported. Both stayed open for good.
func TestISRChangeSpansEndWhenTheSenderStops(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	e := newTracedEnv(t, tracer)
	e.ctrl.setAnswer(func(*controlv1.AlterPartitionRequest) (*controlv1.AlterPartitionResponse, error) {
		return nil, errors.New("controller unreachable")
	})
	e.state(1, 1, 1, []int32{1, 2}, nil)
	e.followerFetch(3, 1, 0) // caught up: the leader proposes ISR 1,2,3
	e.ctrl.call(t)
	e.clock.WaitTimer(t, alterBackoff, 1) // the failed change waits to be retried
	e.m.Close()

	_, late := tracer.Start(t.Context(), "late isr change")
	e.m.alter.enqueue(e.replica(), partition.AlterPartitionRequest{}, late)

	ended := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		ended[s.Name()] = s
	}
	for _, name := range []string{"broker.isr_expand", "late isr change"} {
		s, ok := ended[name]
		if !ok {
			t.Errorf("span %s never ended", name)
			continue
		}
		if st := s.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "broker stopped") {
			t.Errorf("span %s ended with status %v %q, want an error saying the broker stopped", name, st.Code, st.Description)
		}
	}
}

// A broker stopping while the controller holds its ISR change gives the
// call up at once: it waited out the attempt's timeout (10 s), holding up
// the broker's shutdown, and the span ended only then.
func TestStoppingGivesUpAnISRChangeTheControllerHolds(t *testing.T) {
	e := newEnv(t)
	e.state(1, 1, 1, []int32{1, 2}, nil)
	hold := make(chan struct{})
	defer close(hold)
	e.ctrl.mu.Lock()
	e.ctrl.hold = hold
	e.ctrl.mu.Unlock()
	e.expandAll(tp0)
	e.ctrl.call(t) // held: the controller froze

	closed := make(chan struct{})
	go func() { e.m.Close(); close(closed) }()
	select {
	case <-e.ctrl.abandoned:
	case <-time.After(alterAttemptTimeout / 2):
		t.Fatal("the held AlterPartition was still waiting after the broker began stopping")
	}
	<-closed
}
