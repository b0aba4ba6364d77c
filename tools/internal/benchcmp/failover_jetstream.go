package benchcmp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	failoverStream  = "bench_failover"
	failoverSubject = "bench.failover"
)

// jetStreamFailover drives the failover run with nats.go in this process:
// synchronous publishes to an R3 file-store stream, each with a
// Nats-Msg-Id header so that a publish retried after a lost answer is
// dropped by the stream's duplicate window (JetStream's idempotence).
type jetStreamFailover struct {
	side *jetStreamSide
	nc   *nats.Conn
	js   nats.JetStreamContext
}

func (j *jetStreamSide) failover(ctx context.Context, out io.Writer, kills int) FailoverFigure {
	jf, err := j.newFailover()
	if err != nil {
		return FailoverFigure{Err: err.Error()}
	}
	defer jf.nc.Close()
	return runFailover(ctx, out, "jetstream", jf, kills)
}

func (j *jetStreamSide) newFailover() (*jetStreamFailover, error) {
	opts, err := j.connectOptions(nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(j.urls, ","), opts...)
	if err != nil {
		return nil, err
	}
	js, err := nc.JetStream(nats.MaxWait(failoverAttempt))
	if err != nil {
		nc.Close()
		return nil, err
	}
	if err := createWhilePlacementSettles(context.Background(), j.log, "stream "+failoverStream, func() error {
		_, err := js.AddStream(&nats.StreamConfig{Name: failoverStream, Subjects: []string{failoverSubject},
			Replicas: 3, Storage: nats.FileStorage}, nats.MaxWait(30*time.Second))
		return err
	}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("creating stream %s: %w", failoverStream, err)
	}
	return &jetStreamFailover{side: j, nc: nc, js: js}, nil
}

// write publishes value seq under its own message id, again after each
// failed attempt, for up to writeRetryBound.
func (jf *jetStreamFailover) write(ctx context.Context, seq int64) error {
	id := strconv.FormatInt(seq, 10)
	deadline := time.Now().Add(writeRetryBound)
	for {
		_, err := jf.js.Publish(failoverSubject, failoverValue(seq), nats.MsgId(id), nats.AckWait(failoverAttempt))
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (jf *jetStreamFailover) info() (*nats.StreamInfo, error) {
	return jf.js.StreamInfo(failoverStream, nats.MaxWait(5*time.Second))
}

func (jf *jetStreamFailover) settled(ctx context.Context) error {
	for i, d := range jf.side.nodes {
		if err := jetStreamReady(ctx, jf.side.monitors[i]); err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
	}
	si, err := jf.info()
	if err != nil {
		return err
	}
	if si.Cluster == nil || si.Cluster.Leader == "" {
		return errors.New("no stream leader")
	}
	if len(si.Cluster.Replicas) != 2 {
		return fmt.Errorf("leader %s, %d other peers", si.Cluster.Leader, len(si.Cluster.Replicas))
	}
	for _, p := range si.Cluster.Replicas {
		if !p.Current || p.Offline {
			return fmt.Errorf("peer %s not current (lag %d)", p.Name, p.Lag)
		}
	}
	return nil
}

func (jf *jetStreamFailover) leader(context.Context) (string, error) {
	si, err := jf.info()
	if err != nil {
		return "", err
	}
	if si.Cluster == nil || si.Cluster.Leader == "" {
		return "", errors.New("no stream leader")
	}
	return si.Cluster.Leader, nil
}

func (jf *jetStreamFailover) node(name string) (int, error) {
	for i, d := range jf.side.nodes {
		if d.name == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no node %s", name)
}

func (jf *jetStreamFailover) kill(name string) error {
	i, err := jf.node(name)
	if err != nil {
		return err
	}
	return jf.side.nodes[i].kill()
}

func (jf *jetStreamFailover) restart(name string) error {
	i, err := jf.node(name)
	if err != nil {
		return err
	}
	d, err := jf.side.nodes[i].restarted()
	if err != nil {
		return err
	}
	jf.side.nodes[i] = d
	return nil
}

// readBack reads the stream from its first message with an ordered
// consumer (no acks) until it has the stream's message count.
func (jf *jetStreamFailover) readBack(ctx context.Context) ([]int64, error) {
	si, err := jf.info()
	if err != nil {
		return nil, err
	}
	sub, err := jf.js.SubscribeSync(failoverSubject, nats.OrderedConsumer(), nats.DeliverAll())
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	var vals []int64
	for uint64(len(vals)) < si.State.Msgs {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return vals, fmt.Errorf("read %d of %d: %w", len(vals), si.State.Msgs, err)
		}
		v, err := parseFailoverValue(m.Data)
		if err != nil {
			return vals, err
		}
		vals = append(vals, v)
	}
	return vals, nil
}
