package kafkascripts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producerRun is what kafka-console-producer.sh's flags ask for.
type producerRun struct {
	fs                                 *pflag.FlagSet
	bootstrap, brokerList, topic       string
	compression, acks, lineReader      string
	readerConfig, producerConfig       string
	properties, producerProperties     []string
	sync                               bool
	batchSize, retries, requestTimeout int64
	retryBackoff, linger, metadataAge  int64
	maxBlock, maxMemory, partitionMem  int64
	socketBuffer                       int64
}

// lineReaderClass is the one reader the script has: each line a record.
const lineReaderClass = "kafka.tools.ConsoleProducer$LineMessageReader"

func producerFlags(r *producerRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-console-producer.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "REQUIRED unless --broker-list(deprecated) is specified. The server(s) to connect to (host:port, several comma-separated)")
	fs.StringVar(&r.brokerList, "broker-list", "", "DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified")
	fs.StringVar(&r.topic, "topic", "", "REQUIRED: the topic to produce messages to")
	fs.BoolVar(&r.sync, "sync", false, "send each message synchronously, one at a time as they arrive")
	fs.StringVar(&r.compression, "compression-codec", "", "the compression codec: none, gzip, snappy, lz4 or zstd (gzip when given without a value)")
	fs.Lookup("compression-codec").NoOptDefVal = "gzip"
	fs.Int64Var(&r.batchSize, "batch-size", 16*1024, "the most bytes a batch of one partition holds (batch.size)")
	fs.Int64Var(&r.retries, "message-send-max-retries", 3, "how many times a refused record is sent again (retries)")
	fs.Int64Var(&r.retryBackoff, "retry-backoff-ms", 100, "the wait before a retry, in ms (retry.backoff.ms)")
	fs.Int64Var(&r.linger, "timeout", 1000, "how long a record may wait for its batch to fill, in ms (linger.ms)")
	fs.StringVar(&r.acks, "request-required-acks", "-1", "the acks the producer asks for: -1/all, 1 or 0 (acks)")
	fs.Int64Var(&r.requestTimeout, "request-timeout-ms", 1500, "the time a produce request may take, in ms (request.timeout.ms)")
	fs.Int64Var(&r.metadataAge, "metadata-expiry-ms", 5*60*1000, "how often metadata is refreshed, in ms (metadata.max.age.ms)")
	fs.Int64Var(&r.maxBlock, "max-block-ms", 60*1000, "how long a send may wait for the topic's metadata, in ms (max.block.ms)")
	fs.Int64Var(&r.maxMemory, "max-memory-bytes", 32*1024*1024, "the bytes buffered for sending (buffer.memory; accepted, not enforced)")
	fs.Int64Var(&r.partitionMem, "max-partition-memory-bytes", 16*1024, "batch.size, over --batch-size")
	fs.StringVar(&r.lineReader, "line-reader", lineReaderClass, "the class reading standard input (only the line reader)")
	fs.Int64Var(&r.socketBuffer, "socket-buffer-size", 1024*100, "the socket's send buffer (send.buffer.bytes; accepted, not enforced)")
	fs.StringArrayVar(&r.properties, "property", nil, "a reader property key=value: parse.key, key.separator (tab), parse.headers, headers.delimiter, headers.separator, headers.key.separator, ignore.error, null.marker")
	fs.StringVar(&r.readerConfig, "reader-config", "", "a properties file for the reader (--property takes precedence)")
	fs.StringArrayVar(&r.producerProperties, "producer-property", nil, "a producer property key=value (acks, linger.ms, compression.type, enable.idempotence, retries, delivery.timeout.ms, security.protocol, ssl.*)")
	fs.StringVar(&r.producerConfig, "producer.config", "", "a producer properties file (--producer-property takes precedence)")
	fs.BoolP("help", "h", false, "print usage information")
	return fs
}

func producerUsage() string {
	var r producerRun
	return "Option:\n" + producerFlags(&r).FlagUsages()
}

// ConsoleProducer is kafka-console-producer.sh (Kafka 3.7's
// ConsoleProducer): each line of stdin a record to --topic, sent as the
// Java producer sends (acks=-1 and idempotence unless told otherwise); a
// record the brokers refuse is logged as Kafka's ErrorLoggingCallback logs
// it, and, as Kafka's tool, the run still ends 0 unless --sync is given
// (then the first refusal ends it, 1).
func ConsoleProducer(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	r, err := parseProducerFlags(args)
	if code, done := parseOutcome(err, "This tool helps to read data from standard input and publish it to Kafka.", producerUsage, stdout, stderr, nil); done {
		return code
	}
	if err := r.run(stdin, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func parseProducerFlags(args []string) (*producerRun, error) {
	if len(args) == 0 {
		return nil, usageError{"This tool helps to read data from standard input and publish it to Kafka."}
	}
	r := &producerRun{}
	fs := producerFlags(r)
	r.fs = fs
	if err := parseKafkaFlags(fs, optionalArg(args, "--compression-codec")); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if h, _ := fs.GetBool("help"); h {
		return nil, pflag.ErrHelp
	}
	if !fs.Changed("bootstrap-server") && !fs.Changed("broker-list") {
		return nil, usageError{"Missing required option(s) [bootstrap-server]"}
	}
	if err := requireOption(fs, "topic"); err != nil {
		return nil, err
	}
	if r.bootstrap == "" {
		r.bootstrap = r.brokerList
	}
	if err := validatePorts(r.bootstrap); err != nil {
		return nil, err
	}
	if r.lineReader != lineReaderClass {
		return nil, fmt.Errorf("--line-reader %s: only the line reader (%s) is available", r.lineReader, lineReaderClass)
	}
	return r, nil
}

// optionalArg joins an option whose argument is optional to the argument
// after it, as jopt-simple takes one that does not look like an option.
func optionalArg(args []string, name string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == name && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out = append(out, name+"="+args[i+1])
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// validatePorts is ToolsUtils.validatePortOrDie: every server host:port.
func validatePorts(servers string) error {
	for _, s := range strings.Split(servers, ",") {
		i := strings.LastIndex(s, ":")
		if i < 0 {
			return usageError{"Please provide valid host:port like host1:9091,host2:9092\n "}
		}
		if _, err := strconv.Atoi(s[i+1:]); err != nil {
			return usageError{"Please provide valid host:port like host1:9091,host2:9092\n "}
		}
	}
	return nil
}

// parseKeyValueArgs is CommandLineUtils.parseKeyValueArgs: key=value, the
// first = splitting, a bare key meaning the empty value.
func parseKeyValueArgs(args []string) map[string]string {
	props := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		props[k] = v
	}
	return props
}

// mergedProps are a properties file's, then --X-property's over them.
func mergedProps(file string, extra []string) (map[string]string, error) {
	props := map[string]string{}
	if file != "" {
		p, err := readProperties(file)
		if err != nil {
			return nil, err
		}
		props = p
	}
	for k, v := range parseKeyValueArgs(extra) {
		props[k] = v
	}
	return props, nil
}

// producerProps are the producer's settings as ConsoleProducer builds
// them: the file, the --producer-property values, then each flag given (or
// its default when the property is not set).
func (r *producerRun) producerProps() (map[string]string, error) {
	props, err := mergedProps(r.producerConfig, r.producerProperties)
	if err != nil {
		return nil, err
	}
	codec := "none"
	if r.fs.Changed("compression-codec") {
		codec = r.compression
	}
	props["compression.type"] = codec
	if _, ok := props["client.id"]; !ok {
		props["client.id"] = "console-producer"
	}
	merge := func(key, flag string) {
		if _, set := props[key]; r.fs.Changed(flag) || !set {
			props[key] = r.fs.Lookup(flag).Value.String()
		}
	}
	merge("linger.ms", "timeout")
	merge("acks", "request-required-acks")
	merge("request.timeout.ms", "request-timeout-ms")
	merge("retries", "message-send-max-retries")
	merge("retry.backoff.ms", "retry-backoff-ms")
	merge("batch.size", "batch-size")
	if r.fs.Changed("max-partition-memory-bytes") {
		props["batch.size"] = r.fs.Lookup("max-partition-memory-bytes").Value.String()
	}
	merge("metadata.max.age.ms", "metadata-expiry-ms")
	merge("max.block.ms", "max-block-ms")
	return props, nil
}

// producerOptions turns the Java producer's settings into the Kafka
// client's, with the Java producer's checks of the ones it refuses.
func producerOptions(props map[string]string) ([]kgo.Opt, error) {
	opts, err := clientOptions(props)
	if err != nil {
		return nil, err
	}
	intProp := func(key string, def int64) (int64, error) {
		v, ok := props[key]
		if !ok {
			return def, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %s for configuration %s: Not a number of type %s", v, key, "LONG")
		}
		return n, nil
	}
	if id := props["client.id"]; id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	// The Java producer asks brokers to create a topic it names
	// (allow.auto.create.topics); the broker's auto.create.topics.enable
	// decides.
	if !strings.EqualFold(strings.TrimSpace(props["allow.auto.create.topics"]), "false") {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	acks := strings.TrimSpace(props["acks"])
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		return nil, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %s for configuration acks: String must be one of: all, -1, 0, 1", acks)
	}
	retries, err := intProp("retries", 2147483647)
	if err != nil {
		return nil, err
	}
	// The Java producer is idempotent unless told otherwise or asked for
	// what idempotence cannot give (acks other than all, no retries), and
	// refuses the contradiction when both are said.
	idempotent := acks == "all" || acks == "-1"
	if retries == 0 {
		idempotent = false
	}
	if v, ok := props["enable.idempotence"]; ok {
		want := strings.EqualFold(strings.TrimSpace(v), "true")
		if want && acks != "all" && acks != "-1" {
			return nil, errors.New("org.apache.kafka.common.config.ConfigException: Must set acks to all in order to use the idempotent producer. Otherwise we cannot guarantee idempotence.")
		}
		if want && retries == 0 {
			return nil, errors.New("org.apache.kafka.common.config.ConfigException: Must set retries to non-zero when using the idempotent producer.")
		}
		idempotent = want
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	opts = append(opts, kgo.RecordRetries(int(retries)))
	switch codec := strings.ToLower(strings.TrimSpace(props["compression.type"])); codec {
	case "", "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return nil, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %s for configuration compression.type: String must be one of: none, gzip, snappy, lz4, zstd", codec)
	}
	for _, d := range []struct {
		key string
		def int64
		opt func(time.Duration) kgo.Opt
	}{
		{"linger.ms", 5, func(d time.Duration) kgo.Opt { return kgo.ProducerLinger(d) }},
		{"request.timeout.ms", 30000, func(d time.Duration) kgo.Opt { return kgo.ProduceRequestTimeout(d) }},
		{"delivery.timeout.ms", 120000, func(d time.Duration) kgo.Opt { return kgo.RecordDeliveryTimeout(d) }},
		{"retry.backoff.ms", 100, func(d time.Duration) kgo.Opt { return kgo.RetryBackoffFn(func(int) time.Duration { return d }) }},
		{"metadata.max.age.ms", 300000, func(d time.Duration) kgo.Opt { return kgo.MetadataMaxAge(d) }},
	} {
		ms, err := intProp(d.key, d.def)
		if err != nil {
			return nil, err
		}
		if ms < 0 {
			return nil, fmt.Errorf("org.apache.kafka.common.config.ConfigException: Invalid value %d for configuration %s: Value must be at least 0", ms, d.key)
		}
		if d.key == "metadata.max.age.ms" && ms < 10 {
			continue // below what the Kafka client allows; keep its default
		}
		opts = append(opts, d.opt(time.Duration(ms)*time.Millisecond))
	}
	batch, err := intProp("batch.size", 16384)
	if err != nil {
		return nil, err
	}
	if batch > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(min(batch, 1<<30))))
	}
	return opts, nil
}

// lineReader is Kafka's LineMessageReader: a line is headers, key and
// value split by the configured separators.
type lineReader struct {
	parseKey, parseHeaders, ignoreError         bool
	keySep, headersDelim, headersSep, hdrKeySep string
	nullMarker                                  *string
	line                                        int
}

func newLineReader(props map[string]string) (*lineReader, error) {
	r := &lineReader{keySep: "\t", headersDelim: "\t", headersSep: ",", hdrKeySep: ":"}
	isTrue := func(k string) bool { return strings.EqualFold(strings.TrimSpace(props[k]), "true") }
	r.parseKey, r.parseHeaders, r.ignoreError = isTrue("parse.key"), isTrue("parse.headers"), isTrue("ignore.error")
	for k, p := range map[string]*string{"key.separator": &r.keySep, "headers.delimiter": &r.headersDelim, "headers.separator": &r.headersSep, "headers.key.separator": &r.hdrKeySep} {
		if v, ok := props[k]; ok {
			*p = v
		}
	}
	fail := func(msg string) error { return errors.New("org.apache.kafka.common.KafkaException: " + msg) }
	switch {
	case r.headersDelim == r.headersSep:
		return nil, fail("headers.delimiter and headers.separator may not be equal")
	case r.headersDelim == r.hdrKeySep:
		return nil, fail("headers.delimiter and headers.key.separator may not be equal")
	case r.headersSep == r.hdrKeySep:
		return nil, fail("headers.separator and headers.key.separator may not be equal")
	}
	if v, ok := props["null.marker"]; ok {
		r.nullMarker = &v
		for _, s := range []struct{ name, sep string }{{"key.separator", r.keySep}, {"headers.separator", r.headersSep}, {"headers.delimiter", r.headersDelim}, {"headers.key.separator", r.hdrKeySep}} {
			if v == s.sep {
				return nil, fail("null.marker and " + s.name + " may not be equal")
			}
		}
	}
	return r, nil
}

// record parses one line into rec.
func (r *lineReader) record(line string, rec *kgo.Record) error {
	r.line++
	isNull := func(s string) bool { return r.nullMarker != nil && s == *r.nullMarker }
	fail := func(msg string) error { return errors.New("org.apache.kafka.common.KafkaException: " + msg) }
	cut := func(enabled bool, start int, sep, name string) (string, bool, error) {
		if !enabled {
			return "", false, nil
		}
		i := strings.Index(line[start:], sep)
		if i < 0 {
			if r.ignoreError {
				return "", false, nil
			}
			return "", false, fail(fmt.Sprintf("No %s found on line number %d: '%s'", name, r.line, line))
		}
		return line[start : start+i], true, nil
	}
	headers, hasHeaders, err := cut(r.parseHeaders, 0, r.headersDelim, "headers delimiter")
	if err != nil {
		return err
	}
	off := 0
	if hasHeaders {
		off = len(headers) + len(r.headersDelim)
	}
	key, hasKey, err := cut(r.parseKey, off, r.keySep, "key separator")
	if err != nil {
		return err
	}
	if hasKey {
		if !isNull(key) {
			rec.Key = []byte(key)
		}
		off += len(key) + len(r.keySep)
	}
	if value := line[off:]; !isNull(value) {
		rec.Value = []byte(value)
	}
	if hasHeaders && !isNull(headers) {
		for _, pair := range strings.Split(headers, r.headersSep) {
			i := strings.Index(pair, r.hdrKeySep)
			if i < 0 {
				if !r.ignoreError {
					return fail(fmt.Sprintf("No header key separator found in pair '%s' on line number %d", pair, r.line))
				}
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: pair})
				continue
			}
			hk, hv := pair[:i], pair[i+len(r.hdrKeySep):]
			if isNull(hk) {
				return fail(fmt.Sprintf("Header keys should not be equal to the null marker '%s' as they can't be null", hk))
			}
			h := kgo.RecordHeader{Key: hk}
			if !isNull(hv) {
				h.Value = []byte(hv)
			}
			rec.Headers = append(rec.Headers, h)
		}
	}
	return nil
}

func (r *producerRun) run(stdin io.Reader, stderr io.Writer) error {
	props, err := r.producerProps()
	if err != nil {
		return err
	}
	opts, err := producerOptions(props)
	if err != nil {
		return err
	}
	readerProps, err := mergedProps(r.readerConfig, r.properties)
	if err != nil {
		return err
	}
	reader, err := newLineReader(readerProps)
	if err != nil {
		return err
	}
	maxBlock, _ := strconv.ParseInt(props["max.block.ms"], 10, 64)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(splitBootstrap(r.bootstrap)...), kgo.DefaultProduceTopic(r.topic)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	log := &sendErrorLog{w: stderr, maxBlock: maxBlock}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var readErr error
	for sc.Scan() {
		rec := &kgo.Record{Topic: r.topic}
		if readErr = reader.record(sc.Text(), rec); readErr != nil {
			break
		}
		if r.sync {
			if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
				return fmt.Errorf("java.util.concurrent.ExecutionException: %s", log.exception(rec, err))
			}
			continue
		}
		cl.Produce(context.Background(), rec, log.callback)
	}
	if err := cl.Flush(context.Background()); err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	return sc.Err()
}

// sendErrorLog is Kafka's ErrorLoggingCallback: each refused record an
// ERROR line naming its key and value sizes, then the exception.
type sendErrorLog struct {
	mu       sync.Mutex
	w        io.Writer
	maxBlock int64
}

func (l *sendErrorLog) callback(rec *kgo.Record, err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	size := func(b []byte) string {
		if b == nil {
			return "null"
		}
		return fmt.Sprintf("%d bytes", len(b))
	}
	kafkaLog(l.w, "ERROR", fmt.Sprintf("Error when sending message to topic %s with key: %s, value: %s with error:", rec.Topic, size(rec.Key), size(rec.Value)),
		"org.apache.kafka.clients.producer.internals.ErrorLoggingCallback")
	fmt.Fprintln(l.w, l.exception(rec, err))
}

// exception is the Java producer's exception for a refused record.
func (l *sendErrorLog) exception(rec *kgo.Record, err error) string {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		// The Java producer waits max.block.ms for the topic to appear.
		return fmt.Sprintf("org.apache.kafka.common.errors.TimeoutException: Topic %s not present in metadata after %d ms.", rec.Topic, l.maxBlock)
	}
	return javaException(err)
}

// javaException names err as the Java client's exception class and
// message.
func javaException(err error) string {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		if errors.Is(err, kgo.ErrRecordTimeout) {
			return "org.apache.kafka.common.errors.TimeoutException: " + err.Error()
		}
		return "org.apache.kafka.common.KafkaException: " + err.Error()
	}
	class := exceptionClass(ke.Message)
	return "org.apache.kafka.common.errors." + class + ": " + ke.Description
}

// kafkaLog writes one line in the layout of Kafka's tools' log4j
// configuration: "[date] LEVEL message (logger)".
func kafkaLog(w io.Writer, level, msg, logger string) {
	fmt.Fprintf(w, "[%s] %s %s (%s)\n", time.Now().Format("2006-01-02 15:04:05,000"), level, msg, logger)
}

// consoleProducerMain is the script reading the process's stdin.
func consoleProducerMain(args []string, stdout, stderr io.Writer) int {
	return ConsoleProducer(args, os.Stdin, stdout, stderr)
}
