package kafkascripts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminTimeout bounds one script's run, as Kafka's admin client's default
// API timeout bounds each of its calls.
const adminTimeout = 60 * time.Second

// requestTimeout is the time a request gives the controller (Kafka's
// request.timeout.ms default).
const requestTimeout = 30 * time.Second

// splitBootstrap is --bootstrap-server's comma-separated list.
func splitBootstrap(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// commandConfig reads --command-config into client options (none when the
// flag is not given).
func commandConfig(path string) ([]kgo.Opt, error) {
	if path == "" {
		return nil, nil
	}
	props, err := readProperties(path)
	if err != nil {
		return nil, err
	}
	return clientOptions(props)
}

// seedAdmin sends every request to the bootstrap servers, the first that
// answers and then that one. Kafka's admin client sends admin requests to
// the controller its Metadata names and metadata requests to any broker; a
// tidemark broker answers both itself (it forwards admin requests to the
// active controller), so the bootstrap broker serves them all, and the
// brokers' advertised addresses, which may mean something only to the host
// (localhost:9092 in the note's lab), are never dialled.
type seedAdmin struct {
	cl        *kgo.Client
	bootstrap []string
	answered  *kgo.Broker
}

func newSeedAdmin(bootstrap []string, opts []kgo.Opt) (*seedAdmin, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &seedAdmin{cl: cl, bootstrap: bootstrap}, nil
}

func (a *seedAdmin) close() { a.cl.Close() }

func (a *seedAdmin) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if a.answered != nil {
		return a.answered.Request(ctx, req)
	}
	var errs []error
	for _, b := range a.cl.SeedBrokers() {
		resp, err := b.Request(ctx, req)
		if err == nil {
			a.answered = b
			return resp, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("no bootstrap server answered (%s): %w", strings.Join(a.bootstrap, ","), errors.Join(errs...))
}

// metadata is a Metadata answer: every topic when topics is nil.
func (a *seedAdmin) metadata(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, mt)
		}
	}
	resp, err := a.request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// kafkaError is the text Kafka's admin client gives an error code: the
// broker's message when it sent one, else the code's own description.
func kafkaError(code int16, message *string) error {
	if code == 0 {
		return nil
	}
	if message != nil && *message != "" {
		return errors.New(*message)
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return errors.New(e.Description)
	}
	return kerr.ErrorForCode(code)
}

// reassignment is one move in flight as ListPartitionReassignments gives
// it: replicas the whole moving set, adding and removing its two ends.
type reassignment struct {
	replicas, adding, removing []int32
}

// listReassignments asks for the moves among parts (every one in flight
// when parts is nil).
func (a *seedAdmin) listReassignments(ctx context.Context, parts []topicPartition) (map[topicPartition]reassignment, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	if parts != nil {
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		byTopic := map[string]int{}
		for _, tp := range parts {
			i, ok := byTopic[tp.Topic]
			if !ok {
				rt := kmsg.NewListPartitionReassignmentsRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
				i = len(req.Topics) - 1
				byTopic[tp.Topic] = i
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
		}
	}
	kresp, err := a.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ListPartitionReassignmentsResponse)
	if resp.ErrorCode != 0 {
		return nil, &codeError{code: resp.ErrorCode, err: kafkaError(resp.ErrorCode, resp.ErrorMessage)}
	}
	out := map[topicPartition]reassignment{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[topicPartition{t.Topic, p.Partition}] = reassignment{replicas: p.Replicas, adding: p.AddingReplicas, removing: p.RemovingReplicas}
		}
	}
	return out, nil
}

// codeError is a refusal with its Kafka error code, for the callers that
// tell codes apart.
type codeError struct {
	code int16
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }
