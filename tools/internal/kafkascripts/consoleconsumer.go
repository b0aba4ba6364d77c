package kafkascripts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumerRun is what kafka-console-consumer.sh's flags ask for.
type consumerRun struct {
	fs                                  *pflag.FlagSet
	bootstrap, topic, include, group    string
	offset, consumerConfig, formatter   string
	formatterConfig, isolation          string
	consumerProperties, properties      []string
	partition, maxMessages, timeoutMs   int32
	fromBeginning, skipMessageOnError   bool
	props, formatterProps               map[string]string
	startOffset                         kgo.Offset
	groupPassed, timeoutSet, maxSet     bool
	keyDeserializer, valueDeserializer  string
	whitelist                           string
	enableSystestEvents, partitionGiven bool
}

const defaultFormatterClass = "kafka.tools.DefaultMessageFormatter"

func consumerFlags(r *consumerRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-console-consumer.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.StringVar(&r.topic, "topic", "", "the topic to consume on")
	fs.StringVar(&r.whitelist, "whitelist", "", "DEPRECATED, use --include instead; ignored if --include specified")
	fs.StringVar(&r.include, "include", "", "a regular expression naming the topics to consume")
	fs.Int32Var(&r.partition, "partition", 0, "the partition to consume from; consumption starts from the end of the partition unless --offset is given")
	fs.StringVar(&r.offset, "offset", "latest", "the offset to consume from (a non-negative number), or 'earliest' (from the beginning) or 'latest' (from the end)")
	fs.StringArrayVar(&r.consumerProperties, "consumer-property", nil, "a consumer property key=value (group.id, auto.offset.reset, enable.auto.commit, isolation.level, client.id, security.protocol, ssl.*)")
	fs.StringVar(&r.consumerConfig, "consumer.config", "", "a consumer properties file (--consumer-property takes precedence)")
	fs.StringVar(&r.formatter, "formatter", defaultFormatterClass, "the class formatting records (only the default formatter)")
	fs.StringArrayVar(&r.properties, "property", nil, "a formatter property key=value: print.timestamp, print.key, print.offset, print.partition, print.headers, print.value, key.separator, line.separator, headers.separator, null.literal")
	fs.StringVar(&r.formatterConfig, "formatter-config", "", "a formatter properties file (--property takes precedence)")
	fs.BoolVar(&r.fromBeginning, "from-beginning", false, "when the consumer has no committed offset, start with the earliest message rather than the latest")
	fs.Int32Var(&r.maxMessages, "max-messages", 0, "the number of messages to consume before exiting (continual when not given)")
	fs.Int32Var(&r.timeoutMs, "timeout-ms", 0, "exit when no message arrives for this many milliseconds")
	fs.BoolVar(&r.skipMessageOnError, "skip-message-on-error", false, "skip a message that cannot be processed instead of halting")
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "REQUIRED: the server(s) to connect to (host:port, several comma-separated)")
	fs.StringVar(&r.keyDeserializer, "key-deserializer", "", "the key deserializer (only org.apache.kafka.common.serialization.StringDeserializer or ByteArrayDeserializer)")
	fs.StringVar(&r.valueDeserializer, "value-deserializer", "", "the value deserializer (as --key-deserializer)")
	fs.BoolVar(&r.enableSystestEvents, "enable-systest-events", false, "log lifecycle events of the consumer (for system tests)")
	fs.StringVar(&r.isolation, "isolation-level", "read_uncommitted", "read_committed to skip transactional messages not committed, read_uncommitted to read all")
	fs.StringVar(&r.group, "group", "", "the consumer group id of the consumer")
	fs.BoolP("help", "h", false, "print usage information")
	return fs
}

func consumerUsage() string {
	var r consumerRun
	return "Option:\n" + consumerFlags(&r).FlagUsages()
}

// ConsoleConsumer is kafka-console-consumer.sh (Kafka 3.7's
// ConsoleConsumer): records of --topic (subscribed in a group, --group's
// or a random console-consumer-N one that commits nothing), of the topics
// --include matches, or of one --partition from --offset, printed by
// Kafka's default formatter, until --max-messages, --timeout-ms without a
// record, or a signal; "Processed a total of N messages" on stderr at the
// end, as Kafka's tool prints it.
func ConsoleConsumer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	r, err := parseConsumerFlags(args)
	if code, done := parseOutcome(err, "This tool helps to read data from Kafka topics and outputs it to standard output.", consumerUsage, stdout, stderr, nil); done {
		return code
	}
	return r.run(ctx, stdout, stderr)
}

// consoleConsumerMain ends the run on SIGINT or SIGTERM, as Kafka's
// shutdown hook does.
func consoleConsumerMain(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ConsoleConsumer(ctx, args, stdout, stderr)
}

// parseConsumerFlags checks the flags in the order Kafka's tool does.
func parseConsumerFlags(args []string) (*consumerRun, error) {
	if len(args) == 0 {
		return nil, usageError{"This tool helps to read data from Kafka topics and outputs it to standard output."}
	}
	r := &consumerRun{}
	fs := consumerFlags(r)
	r.fs = fs
	if err := parseKafkaFlags(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if h, _ := fs.GetBool("help"); h {
		return nil, pflag.ErrHelp
	}
	var err error
	if r.props, err = mergedProps(r.consumerConfig, nil); err != nil {
		return nil, err
	}
	extra := parseKeyValueArgs(r.consumerProperties)
	if r.formatterProps, err = mergedProps(r.formatterConfig, r.properties); err != nil {
		return nil, err
	}
	if r.formatter != defaultFormatterClass && r.formatter != "org.apache.kafka.tools.consumer.DefaultMessageFormatter" {
		return nil, fmt.Errorf("--formatter %s: only the default formatter (%s) is available", r.formatter, defaultFormatterClass)
	}
	for _, d := range []string{r.keyDeserializer, r.valueDeserializer, r.formatterProps["key.deserializer"], r.formatterProps["value.deserializer"]} {
		if d != "" && d != "org.apache.kafka.common.serialization.StringDeserializer" && d != "org.apache.kafka.common.serialization.ByteArrayDeserializer" {
			return nil, fmt.Errorf("deserializer %s: only StringDeserializer and ByteArrayDeserializer are available", d)
		}
	}
	if !fs.Changed("include") && fs.Changed("whitelist") {
		r.include = r.whitelist
	}
	included := fs.Changed("include") || fs.Changed("whitelist")
	if fs.Changed("topic") == included {
		msg := "Exactly one of --include/--topic is required. "
		if fs.Changed("whitelist") {
			msg += "--whitelist is DEPRECATED use --include instead; ignored if --include specified."
		}
		return nil, usageError{msg}
	}
	r.partitionGiven = fs.Changed("partition")
	if r.partitionGiven {
		if !fs.Changed("topic") {
			return nil, usageError{"The topic is required when partition is specified."}
		}
		if r.fromBeginning && fs.Changed("offset") {
			return nil, usageError{"Options from-beginning and offset cannot be specified together."}
		}
	} else if fs.Changed("offset") {
		return nil, usageError{"The partition is required when offset is specified."}
	}
	switch o := strings.ToLower(r.offset); {
	case fs.Changed("offset") && o == "earliest", !fs.Changed("offset") && r.fromBeginning:
		r.startOffset = kgo.NewOffset().AtStart()
	case o == "latest":
		r.startOffset = kgo.NewOffset().AtEnd()
	default:
		n, err := strconv.ParseInt(o, 10, 64)
		if err != nil || n < 0 {
			return nil, usageError{fmt.Sprintf("The provided offset value '%s' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long.", r.offset)}
		}
		r.startOffset = kgo.NewOffset().At(n)
	}
	if err := requireOption(fs, "bootstrap-server"); err != nil {
		return nil, err
	}
	// A group id may come three ways; they must agree.
	var groups []string
	for _, g := range []struct {
		v  string
		ok bool
	}{{r.group, fs.Changed("group")}, {r.props["group.id"], hasKey(r.props, "group.id")}, {extra["group.id"], hasKey(extra, "group.id")}} {
		if g.ok && !containsString(groups, g.v) {
			groups = append(groups, g.v)
		}
	}
	if len(groups) > 1 {
		return nil, usageError{"The group ids provided in different places (directly using '--group', via '--consumer-property', or via '--consumer.config') do not match. Detected group ids: '" + strings.Join(groups, "', '") + "'"}
	}
	for k, v := range extra {
		r.props[k] = v
	}
	if reset, set := r.props["auto.offset.reset"]; set {
		if r.fromBeginning && reset != "earliest" {
			return nil, fmt.Errorf("Can't simultaneously specify --from-beginning and 'auto.offset.reset=%s', please remove one option", reset)
		}
	} else if r.fromBeginning {
		r.props["auto.offset.reset"] = "earliest"
	} else {
		r.props["auto.offset.reset"] = "latest"
	}
	if len(groups) == 1 {
		r.props["group.id"] = groups[0]
		r.groupPassed = true
	} else {
		// Kafka's tool joins a group of its own that it does not mean to
		// come back to, so it commits nothing unless told to.
		r.props["group.id"] = fmt.Sprintf("console-consumer-%d", rand.IntN(100000))
		if !hasKey(r.props, "enable.auto.commit") {
			r.props["enable.auto.commit"] = "false"
		}
	}
	if r.groupPassed && r.partitionGiven {
		return nil, usageError{"Options group and partition cannot be specified together."}
	}
	if !hasKey(r.props, "client.id") {
		r.props["client.id"] = "console-consumer"
	}
	if _, set := r.props["isolation.level"]; fs.Changed("isolation-level") || !set {
		r.props["isolation.level"] = r.isolation
	}
	r.timeoutSet, r.maxSet = fs.Changed("timeout-ms") && r.timeoutMs >= 0, fs.Changed("max-messages") && r.maxMessages >= 0
	return r, nil
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// consumerOptions turns the Java consumer's settings into the Kafka
// client's.
func (r *consumerRun) consumerOptions() ([]kgo.Opt, error) {
	opts, err := clientOptions(r.props)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ClientID(r.props["client.id"]))
	switch iso := r.props["isolation.level"]; iso {
	case "read_uncommitted":
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	case "read_committed":
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	default:
		return nil, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %s for configuration isolation.level: String must be one of: read_committed, read_uncommitted", iso)
	}
	if r.partitionGiven {
		return append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.topic: {r.partition: r.startOffset}})), nil
	}
	switch reset := r.props["auto.offset.reset"]; reset {
	case "earliest":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	case "latest":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	case "none":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	default:
		return nil, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %s for configuration auto.offset.reset: String must be one of: latest, earliest, none", reset)
	}
	if r.include != "" {
		// Java's Pattern.matches: the whole name.
		if _, err := regexp.Compile(r.include); err != nil {
			return nil, fmt.Errorf("--include %s: %w", r.include, err)
		}
		opts = append(opts, kgo.ConsumeRegex(), kgo.ConsumeTopics("^(?:"+r.include+")$"))
	} else {
		opts = append(opts, kgo.ConsumeTopics(r.topic))
	}
	opts = append(opts, kgo.ConsumerGroup(r.props["group.id"]),
		// Java's default assignors, range first.
		kgo.Balancers(kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()))
	if r.autoCommit() {
		// Only what was printed is committed (Kafka's tool seeks back
		// over fetched records it did not print before closing).
		opts = append(opts, kgo.AutoCommitMarks())
	} else {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	if v, ok := r.props["auto.commit.interval.ms"]; ok && r.autoCommit() {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %s for configuration auto.commit.interval.ms", v)
		}
		opts = append(opts, kgo.AutoCommitInterval(time.Duration(ms)*time.Millisecond))
	}
	if v, ok := r.props["session.timeout.ms"]; ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %s for configuration session.timeout.ms", v)
		}
		opts = append(opts, kgo.SessionTimeout(time.Duration(ms)*time.Millisecond))
	}
	return opts, nil
}

// autoCommit is enable.auto.commit (the Java consumer's default true).
func (r *consumerRun) autoCommit() bool {
	return !strings.EqualFold(strings.TrimSpace(r.props["enable.auto.commit"]), "false")
}

func (r *consumerRun) run(ctx context.Context, stdout, stderr io.Writer) int {
	count := 0
	logErr := func(msg, exception string) {
		kafkaLog(stderr, "ERROR", msg, "kafka.tools.ConsoleConsumer$")
		fmt.Fprintln(stderr, exception)
	}
	opts, err := r.consumerOptions()
	if err != nil {
		logErr("Unknown error when running consumer: ", err.Error())
		return 1
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(splitBootstrap(r.bootstrap)...)}, opts...)...)
	if err != nil {
		logErr("Unknown error when running consumer: ", "org.apache.kafka.common.KafkaException: "+err.Error())
		return 1
	}
	// As Kafka's tool: the count is printed once the consumer exists.
	defer func() { fmt.Fprintf(stderr, "Processed a total of %d messages\n", count) }()
	out := bufio.NewWriter(stdout)
	defer func() {
		out.Flush()
		if !r.partitionGiven && r.autoCommit() {
			cctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			defer cancel()
			if err := cl.CommitMarkedOffsets(cctx); err != nil {
				kafkaLog(stderr, "WARN", "[Consumer clientId="+r.props["client.id"]+", groupId="+r.props["group.id"]+"] Synchronous auto-commit of offsets failed: "+err.Error(), "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator")
			}
		}
		cl.Close()
	}()
	f := newFormatter(r.formatterProps)
	for !r.maxSet || count < int(r.maxMessages) {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if r.timeoutSet {
			pollCtx, cancel = context.WithTimeout(ctx, time.Duration(r.timeoutMs)*time.Millisecond)
		}
		n := -1
		if r.maxSet {
			n = int(r.maxMessages) - count
		}
		// Records polled but not printed do not leave the client's
		// buffer: PollRecords hands out at most n.
		fetches := cl.PollRecords(pollCtx, n)
		timedOut := pollCtx.Err() != nil && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil {
			return 0 // a signal: Kafka's shutdown hook ends the run cleanly
		}
		var fatal error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && fatal == nil && !isRetriable(err) {
				fatal = err
			}
		})
		if fatal != nil {
			logErr("Error processing message, terminating consumer process: ", javaException(fatal))
			return 0
		}
		recs := fetches.Records()
		if len(recs) == 0 && timedOut {
			logErr("Error processing message, terminating consumer process: ", "org.apache.kafka.common.errors.TimeoutException")
			return 0
		}
		for _, rec := range recs {
			count++
			f.write(out, rec)
			cl.MarkCommitRecords(rec)
		}
		if err := out.Flush(); err != nil {
			fmt.Fprintln(stderr, "Unable to write to standard out, closing consumer.")
			return 0
		}
	}
	return 0
}

// isRetriable reports errors the Java consumer retries without surfacing.
func isRetriable(err error) bool {
	var re interface{ IsRetriable() bool }
	return errors.As(err, &re) && re.IsRetriable()
}

// messageFormatter is Kafka's DefaultMessageFormatter.
type messageFormatter struct {
	timestamp, key, value, partition, offset, headers bool
	keySep, lineSep, headersSep, nullLiteral          string
}

func newFormatter(props map[string]string) *messageFormatter {
	f := &messageFormatter{value: true, keySep: "\t", lineSep: "\n", headersSep: ",", nullLiteral: "null"}
	for k, p := range map[string]*bool{"print.timestamp": &f.timestamp, "print.key": &f.key, "print.value": &f.value, "print.partition": &f.partition, "print.offset": &f.offset, "print.headers": &f.headers} {
		if v, ok := props[k]; ok {
			*p = strings.EqualFold(strings.TrimSpace(v), "true")
		}
	}
	for k, p := range map[string]*string{"key.separator": &f.keySep, "line.separator": &f.lineSep, "headers.separator": &f.headersSep, "null.literal": &f.nullLiteral} {
		if v, ok := props[k]; ok {
			*p = v
		}
	}
	return f
}

func (f *messageFormatter) write(w *bufio.Writer, rec *kgo.Record) {
	sep := func(more bool) {
		if more {
			w.WriteString(f.keySep)
		} else {
			w.WriteString(f.lineSep)
		}
	}
	bytesOrNull := func(b []byte) []byte {
		if b == nil {
			return []byte(f.nullLiteral)
		}
		return b
	}
	if f.timestamp {
		kind := "CreateTime"
		if rec.Attrs.TimestampType() == 1 {
			kind = "LogAppendTime"
		}
		fmt.Fprintf(w, "%s:%d", kind, rec.Timestamp.UnixMilli())
		sep(f.offset || f.partition || f.headers || f.key || f.value)
	}
	if f.partition {
		fmt.Fprintf(w, "Partition:%d", rec.Partition)
		sep(f.offset || f.headers || f.key || f.value)
	}
	if f.offset {
		fmt.Fprintf(w, "Offset:%d", rec.Offset)
		sep(f.headers || f.key || f.value)
	}
	if f.headers {
		if len(rec.Headers) == 0 {
			w.WriteString("NO_HEADERS")
		}
		for i, h := range rec.Headers {
			if i > 0 {
				w.WriteString(f.headersSep)
			}
			w.WriteString(h.Key + ":")
			w.Write(bytesOrNull(h.Value))
		}
		sep(f.key || f.value)
	}
	if f.key {
		w.Write(bytesOrNull(rec.Key))
		sep(f.value)
	}
	if f.value {
		w.Write(bytesOrNull(rec.Value))
		w.WriteString(f.lineSep)
	}
}
