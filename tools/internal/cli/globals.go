package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"tidemark.io/services/client"
	"tidemark.io/services/platform/config"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/tlsconf"
)

// Defaults match `make run`'s dev cluster.
var (
	defaultBootstrap   = []string{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"}
	defaultControllers = []string{"127.0.0.1:9190", "127.0.0.1:9191"}
)

const (
	// reachTimeout bounds the check that a cluster answers at all, so that a
	// cluster that is down fails fast instead of after the client's retries.
	reachTimeout = 3 * time.Second
	// envAnnotation marks flags that have a TIDEMARK_* environment twin.
	envAnnotation = "tidemark_env"
)

// globals are the flags every cluster command shares.
type globals struct {
	bootstrap      []string
	controllers    []string
	commandTimeout time.Duration

	// tlsFlags are the TLS flags as given; tls is what they resolve to
	// (see security), once.
	tlsFlags    tlsconf.Options
	tls         tlsconf.Options
	tlsErr      error
	tlsResolved bool

	// restart and environ: see Streams.
	restart func(env []string) error
	environ func() []string
}

func addGlobals(root *cobra.Command, getenv func(string) string) *globals {
	g := &globals{}
	f := root.PersistentFlags()
	f.StringSliceVar(&g.bootstrap, "bootstrap-server", defaultBootstrap, "broker addresses (host:port, comma-separated)")
	f.StringSliceVar(&g.controllers, "controller", defaultControllers, "controller addresses (host:port, comma-separated)")
	f.DurationVar(&g.commandTimeout, "command-timeout", 30*time.Second, "how long an admin or metadata operation may take before the command gives up")
	withEnv(f, "bootstrap-server", "controller", "command-timeout")
	addTLSFlags(f, &g.tlsFlags)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := applyEnv(cmd.Flags(), getenv); err != nil {
			return err
		}
		if g.commandTimeout <= 0 {
			return usagef("--command-timeout must be positive, got %v", g.commandTimeout)
		}
		return nil
	}
	return g
}

// withEnv gives flags an environment twin, named as the services name
// theirs: --bootstrap-server is TIDEMARK_BOOTSTRAP_SERVER.
func withEnv(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		f := fs.Lookup(n)
		env := config.EnvName(n)
		_ = fs.SetAnnotation(n, envAnnotation, []string{env})
		f.Usage += " (env " + env + ")"
	}
}

// applyEnv sets every flag with an environment twin that the command line
// left alone: flags win over the environment, which wins over defaults.
func applyEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		env, ok := f.Annotations[envAnnotation]
		if !ok || f.Changed {
			return
		}
		if v := getenv(env[0]); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, usagef("invalid value %q for --%s from %s: %v", v, f.Name, env[0], err))
			}
		}
	})
	return errors.Join(errs...)
}

// opContext bounds one admin or metadata operation by --command-timeout.
func (g *globals) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.commandTimeout)
}

// admin returns an admin client on the controllers once one of them answers.
func (g *globals) admin(ctx context.Context) (*client.Admin, error) {
	dial, err := g.dialOption()
	if err != nil {
		return nil, err
	}
	if err := reach(ctx, "controller", "--controller", g.controllers, dial, g.tlsFlags.Plaintext); err != nil {
		return nil, err
	}
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	a, err := client.NewAdmin(g.controllers, opts)
	if err != nil {
		return nil, usagef("--controller: %v", err)
	}
	return a, nil
}

// client returns a broker client once one of the brokers answers.
func (g *globals) client(ctx context.Context) (*client.Client, error) {
	dial, err := g.dialOption()
	if err != nil {
		return nil, err
	}
	if err := reach(ctx, "broker", "--bootstrap-server", g.bootstrap, dial, g.tlsFlags.Plaintext); err != nil {
		return nil, err
	}
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	c, err := client.New(g.bootstrap, opts)
	if err != nil {
		return nil, usagef("--bootstrap-server: %v", err)
	}
	return c, nil
}

// reach checks that at least one of addrs answers the gRPC health check
// (with any status: standby controllers count), so that a cluster that is
// down, or an address that is not a tidemark node, fails within seconds
// with the addresses named, instead of after the client's retries run out.
func reach(ctx context.Context, what, flag string, addrs []string, dial grpc.DialOption, plaintext bool) error {
	if len(addrs) == 0 {
		return usagef("%s: no address given", flag)
	}
	if err := checkAddrs(flag, addrs); err != nil {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	type answer struct {
		addr string
		err  error
	}
	ch := make(chan answer, len(addrs))
	for _, a := range addrs {
		go func() {
			_, err := checkHealth(ctx, hostPort(a), "", dial)
			ch <- answer{a, err}
		}()
	}
	why := map[string]string{}
	for range addrs {
		a := <-ch
		if a.err == nil {
			return nil
		}
		why[a.addr] = dialReason(a.err, plaintext, reachTimeout.String())
	}
	// The command's own end came first: say which, not "context canceled".
	switch err := parent.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no %s answered within --command-timeout (%s %s): %w", what, flag, strings.Join(addrs, ","), err)
	case err != nil:
		return fmt.Errorf("interrupted while reaching a %s (%s %s): %w", what, flag, strings.Join(addrs, ","), err)
	}
	var parts []string
	for _, a := range addrs {
		parts = append(parts, a+": "+why[a])
	}
	return fmt.Errorf("cannot reach any %s (%s %s): %s", what, flag, strings.Join(addrs, ","), strings.Join(parts, "; "))
}

// checkAddrs refuses an address that is not host:port before any dial:
// the resolver's answer to one ("produced zero addresses") names neither
// the mistake nor the flag.
func checkAddrs(flag string, addrs []string) error {
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(hostPort(a))
		if err == nil && (port == "" || port == "0") {
			err = errors.New("no port")
		}
		if err != nil {
			return usagef("%s: %q is not a host:port address (%v)", flag, a, err)
		}
	}
	return nil
}

const noPlaintextAnswer = "no plaintext answer: the node may require TLS (drop --plaintext)"

// hostPort strips a URL scheme (etcd endpoints are often written as URLs).
func hostPort(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	return strings.TrimSuffix(addr, "/")
}

// dialReason shortens a failed dial to what an operator needs to read;
// plaintext says the dial was without TLS, and wait is how long it waited
// for an answer, named as the operator knows it.
func dialReason(err error, plaintext bool, wait string) string {
	msg := status.Convert(err).Message()
	// A TLS server given a plaintext HTTP/2 preface closes the connection:
	// the client reads either that (no server preface) or, when the close
	// comes first, a reset.
	if plaintext && strings.Contains(msg, "connection reset") {
		return "connection reset: " + noPlaintextAnswer
	}
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "network is unreachable", "connection reset"} {
		if strings.Contains(msg, s) {
			return s
		}
	}
	// TLS mismatches: say which side to change.
	switch {
	case strings.Contains(msg, "server preface"):
		return noPlaintextAnswer
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "it answers without TLS: the cluster may run with --plaintext (give --plaintext)"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "its certificate is not signed by the CA of --tls.ca"
	case strings.Contains(msg, "certificate is valid for"):
		return "its certificate does not name this host (" + msg + "); --tls.server.name names the one to expect"
	case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "certificate required"), strings.Contains(msg, "unknown certificate authority"),
		strings.Contains(msg, "expired certificate"):
		return "it refused our certificate (--tls.cert: another CA's, or expired?): " + msg
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		return "no answer within " + wait
	case codes.Unimplemented:
		return "answers, but not as a tidemark node (" + msg + ")"
	}
	return msg
}

// topicInfo is what the data commands need to know about a topic.
type topicInfo struct {
	partitions int32
	racks      map[int32]string // broker id to rack
}

// chosen returns the partitions a --partition flag names: that one, or
// every partition of the topic for -1.
func (i topicInfo) chosen(partition int32) []int32 {
	if partition >= 0 {
		return []int32{partition}
	}
	parts := make([]int32, 0, i.partitions)
	for p := range i.partitions {
		parts = append(parts, p)
	}
	return parts
}

// topicClient connects to the cluster and checks topic (and partition,
// unless -1) with checkTopic; the caller closes the client.
func (g *globals) topicClient(ctx context.Context, topic string, partition int32) (*client.Client, topicInfo, error) {
	c, err := g.client(ctx)
	if err != nil {
		return nil, topicInfo{}, err
	}
	info, err := g.checkTopic(ctx, c, topic, partition)
	if err != nil {
		c.Close()
		return nil, topicInfo{}, err
	}
	return c, info, nil
}

// createHint adds to a producing command's "topic does not exist" how to
// create it: the gRPC produce path creates no topic (a Kafka client's
// Metadata does, with auto.create.topics.enable), so someone used to
// kafka-console-producer creating topics on first use is told the step.
func createHint(err error, topic string) error {
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Code != kerr.UnknownTopicOrPartition || !strings.HasSuffix(ke.Message, "does not exist") {
		return err
	}
	hinted := *ke
	hinted.Message = fmt.Sprintf("%s: create it first with tidemark topics create --topic %s", ke.Message, topic)
	return &hinted
}

// topicSettle is how long checkTopic keeps asking about a topic the
// broker asked does not know: a topic created a moment ago reaches each
// broker with the controller's next UpdateMetadata, which a loaded machine
// may deliver after the creation was answered (Kafka's clients treat the
// error as retriable too). A typo still fails within it.
const topicSettle = 2 * time.Second

// checkTopic makes sure the topic (and partition, when >= 0) exists, so that
// a typo fails soon with UNKNOWN_TOPIC_OR_PARTITION rather than after the
// producer's metadata wait. A retriable failure (no broker answered, or
// every one asked is still starting and has no metadata yet) is retried
// within --command-timeout, an unknown topic or partition within
// topicSettle.
func (g *globals) checkTopic(ctx context.Context, c *client.Client, topic string, partition int32) (topicInfo, error) {
	ctx, cancel := g.opContext(ctx)
	defer cancel()
	settled := time.Now().Add(topicSettle)
	for attempt := 0; ; attempt++ {
		info, err := lookTopic(ctx, c, topic, partition)
		if kerr.CodeOf(err) != kerr.UnknownTopicOrPartition || time.Now().After(settled) ||
			!sleepCtx(ctx, min(client.DefaultRetryBackoff<<min(attempt, 4), client.DefaultRetryBackoffMax, time.Until(settled))) {
			return info, err
		}
	}
}

// lookTopic is one look at topic (and partition) through the metadata,
// retrying only what no broker could answer.
func lookTopic(ctx context.Context, c *client.Client, topic string, partition int32) (topicInfo, error) {
	resp, err := c.Metadata(ctx, topic)
	for attempt := 0; err != nil && kerr.CodeOf(err).Retriable(); attempt++ {
		if !sleepCtx(ctx, min(client.DefaultRetryBackoff<<min(attempt, 4), client.DefaultRetryBackoffMax)) {
			break
		}
		resp, err = c.Metadata(ctx, topic)
	}
	if err != nil {
		return topicInfo{}, err
	}
	info := topicInfo{racks: map[int32]string{}}
	for _, b := range resp.GetBrokers() {
		info.racks[b.GetId()] = b.GetRack()
	}
	for _, t := range resp.GetTopics() {
		if t.GetName() != topic {
			continue
		}
		switch code := kerr.Code(t.GetErrorCode()); code {
		case kerr.None:
		case kerr.UnknownTopicOrPartition:
			return info, &kerr.Error{Code: code, Message: fmt.Sprintf("topic %q does not exist", topic)}
		default: // a refusal (TOPIC_AUTHORIZATION_FAILED) is not a missing topic
			msg := t.GetErrorMessage()
			if msg == "" {
				msg = fmt.Sprintf("topic %q", topic)
			}
			return info, &kerr.Error{Code: code, Message: msg}
		}
		info.partitions = int32(len(t.GetPartitions()))
	}
	if info.partitions == 0 {
		return info, kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", topic)
	}
	if partition >= info.partitions {
		return info, kerr.New(kerr.UnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", topic, info.partitions, partition)
	}
	return info, nil
}

// needTopic is the check for the many commands that require --topic.
func needTopic(topic string) error {
	if strings.TrimSpace(topic) == "" {
		return usagef("--topic is required")
	}
	return nil
}

// checkPartitionFlag refuses partition numbers below -1 (which means "all"
// or "chosen by the producer").
func checkPartitionFlag(p int32) error {
	if p < -1 {
		return usagef("--partition must be a partition number, or -1, got %d", p)
	}
	return nil
}
