package benchcmp

import (
	"context"
	"fmt"
	"io"
	"time"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/client"
)

const failoverTopic = "bench-failover"

// failoverAttempt bounds one produce attempt or one publish, on both systems.
const failoverAttempt = 2 * time.Second

// tidemarkFailover drives the failover run with tidemark's Go client: an
// idempotent acks=all producer in this process.
type tidemarkFailover struct {
	side   *tidemarkSide
	client *client.Client
	admin  *client.Admin
	prod   *client.Producer
}

func (t *tidemarkSide) failover(ctx context.Context, out io.Writer, kills int) FailoverFigure {
	tf, err := t.newFailover(ctx)
	if err != nil {
		return FailoverFigure{Err: err.Error()}
	}
	defer tf.close()
	return runFailover(ctx, out, "tidemark", tf, kills)
}

func (t *tidemarkSide) newFailover(ctx context.Context) (*tidemarkFailover, error) {
	o := t.cl.Options()
	tc, err := o.Security().ClientOrNil()
	if err != nil {
		return nil, err
	}
	tf := &tidemarkFailover{side: t}
	opts := client.Options{RequestTimeout: failoverAttempt, TLS: tc}
	if tf.admin, err = client.NewAdmin(o.Ports().Controllers, opts); err != nil {
		return nil, err
	}
	if tf.client, err = client.New(o.Ports().Brokers, opts); err != nil {
		tf.close()
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = tf.admin.CreateTopic(cctx, &adminv1.TopicSpec{Name: failoverTopic, NumPartitions: 1, ReplicationFactor: 3,
		Configs: t.topicConfigs()})
	cancel()
	if err != nil {
		tf.close()
		return nil, fmt.Errorf("creating %s: %w", failoverTopic, err)
	}
	if tf.prod, err = client.NewProducer(tf.client, client.ProducerOptions{Acks: client.AcksAll, Idempotence: client.IdempotenceOn,
		Linger: -1, RequestTimeout: failoverAttempt, DeliveryTimeout: writeRetryBound}); err != nil {
		tf.close()
		return nil, err
	}
	return tf, nil
}

func (tf *tidemarkFailover) close() {
	if tf.prod != nil {
		ctx, cancel := context.WithTimeout(context.Background(), writeRetryBound)
		_ = tf.prod.Close(ctx)
		cancel()
	}
	if tf.client != nil {
		tf.client.Close()
	}
	if tf.admin != nil {
		tf.admin.Close()
	}
}

func (tf *tidemarkFailover) write(ctx context.Context, seq int64) error {
	_, err := tf.prod.Produce(ctx, client.Record{Topic: failoverTopic, Partition: 0, ManualPartition: true, Value: failoverValue(seq)})
	return err
}

func (tf *tidemarkFailover) partition(ctx context.Context) (*adminv1.PartitionDescription, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := tf.admin.DescribeTopics(ctx, &adminv1.DescribeTopicsRequest{Topics: []string{failoverTopic}})
	if err != nil {
		return nil, err
	}
	for _, td := range resp.GetTopics() {
		if td.GetName() == failoverTopic && len(td.GetPartitions()) == 1 {
			return td.GetPartitions()[0], nil
		}
	}
	return nil, fmt.Errorf("%s not described", failoverTopic)
}

func (tf *tidemarkFailover) settled(ctx context.Context) error {
	p, err := tf.partition(ctx)
	if err != nil {
		return err
	}
	if p.GetLeader() <= 0 || len(p.GetIsr()) != 3 {
		return fmt.Errorf("leader %d, ISR %v", p.GetLeader(), p.GetIsr())
	}
	return nil
}

func (tf *tidemarkFailover) leader(ctx context.Context) (string, error) {
	p, err := tf.partition(ctx)
	if err != nil {
		return "", err
	}
	if p.GetLeader() <= 0 {
		return "", fmt.Errorf("%s has no leader", failoverTopic)
	}
	return fmt.Sprintf("broker-%d", p.GetLeader()), nil
}

func (tf *tidemarkFailover) kill(name string) error {
	n, err := tf.side.cl.Node(name)
	if err != nil {
		return err
	}
	return n.Kill()
}

func (tf *tidemarkFailover) restart(name string) error {
	n, err := tf.side.cl.Node(name)
	if err != nil {
		return err
	}
	return n.Start()
}

func (tf *tidemarkFailover) readBack(ctx context.Context) ([]int64, error) {
	end, err := tf.client.ListOffsets(ctx, failoverTopic, 0, client.Latest())
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	cs, err := client.NewConsumer(tf.client, client.ConsumerOptions{Topic: failoverTopic, Partition: 0,
		StartOffset: client.OffsetEarliest, MaxWait: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var vals []int64
	for cs.Position() < end.Offset {
		recs, err := cs.Poll(ctx)
		if err != nil {
			// A restarted broker may still be taking its place: again,
			// within ctx.
			if ctx.Err() != nil {
				return vals, fmt.Errorf("read at offset %d of %d: %w", cs.Position(), end.Offset, err)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, rc := range recs {
			v, err := parseFailoverValue(rc.Value)
			if err != nil {
				return vals, fmt.Errorf("offset %d: %w", rc.Offset, err)
			}
			vals = append(vals, v)
		}
	}
	return vals, nil
}
