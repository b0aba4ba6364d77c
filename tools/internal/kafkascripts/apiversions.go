package kafkascripts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaAPINames respells franz-go's names of the API keys the way Kafka's
// ApiKeys does; a name not listed is spelt the same in both.
var kafkaAPINames = map[string]string{
	"LeaderAndISR":                 "LeaderAndIsr",
	"SASLHandshake":                "SaslHandshake",
	"SASLAuthenticate":             "SaslAuthenticate",
	"InitProducerID":               "InitProducerId",
	"DescribeACLs":                 "DescribeAcls",
	"CreateACLs":                   "CreateAcls",
	"DeleteACLs":                   "DeleteAcls",
	"AlterPartitionAssignments":    "AlterPartitionReassignments",
	"DescribeUserSCRAMCredentials": "DescribeUserScramCredentials",
	"AlterUserSCRAMCredentials":    "AlterUserScramCredentials",
	"AllocateProducerIDs":          "AllocateProducerIds",
	"ListConfigResources":          "ListClientMetricsResources", // Kafka 3.7's name for key 74
}

// kafka37LastKey is the highest API key Kafka 3.7 knows; those up to it
// that a 3.7 client lists are printed even when the broker does not serve
// them (UNSUPPORTED).
const kafka37LastKey = 74

// controllerOnlyAPIs are the keys up to kafka37LastKey that only KRaft
// controllers serve (Vote, BeginQuorumEpoch, EndQuorumEpoch,
// FetchSnapshot, BrokerRegistration, BrokerHeartbeat,
// ControllerRegistration, AssignReplicasToDirs): Kafka's tool leaves them
// out.
var controllerOnlyAPIs = map[int16]bool{52: true, 53: true, 54: true, 59: true, 62: true, 63: true, 70: true, 73: true}

// apiName is Kafka's display name of an API key.
func apiName(key int16) string {
	n := kmsg.NameForKey(key)
	if k, ok := kafkaAPINames[n]; ok {
		return k
	}
	return n
}

// BrokerAPIVersions is kafka-broker-api-versions.sh: the brokers the
// bootstrap server's Metadata names, each asked for ApiVersions at its
// advertised address, printed as Kafka's tool prints them, one block per
// broker:
//
//	host:port (id: 1 rack: null) -> (
//		Produce(0): 3 to 11 [usable: 11],
//		...
//		ListClientMetricsResources(74): UNSUPPORTED
//	)
//
// "usable" is the newest version both the broker and this tool (franz-go's
// kmsg) speak. A broker that cannot be reached gets "-> ERROR: ..." and
// the others are still printed (exit 0), as in Kafka.
func BrokerAPIVersions(args []string, stdout, stderr io.Writer) int {
	var bootstrap, commandConfigPath string
	fs := pflag.NewFlagSet("kafka-broker-api-versions.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&bootstrap, "bootstrap-server", "", "REQUIRED: the server to connect to (host:port, several comma-separated)")
	fs.StringVar(&commandConfigPath, "command-config", "", "a properties file of client settings (security.protocol=SSL and PEM ssl.truststore.*/ssl.keystore.*)")
	fs.BoolP("help", "h", false, "print usage information")
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "This tool helps to retrieve broker version information.")
		fmt.Fprint(w, fs.FlagUsages())
	}
	err := parseKafkaFlags(fs, args)
	if h, _ := fs.GetBool("help"); errors.Is(err, pflag.ErrHelp) || (err == nil && h) {
		usage(stdout)
		return 0
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("Found non-option arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err == nil && !fs.Changed("bootstrap-server") {
		err = errors.New("Missing required argument \"[bootstrap-server]\"")
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		usage(stderr)
		return 1
	}
	opts, err := commandConfig(commandConfigPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	adm, err := newSeedAdmin(splitBootstrap(bootstrap), opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer adm.close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	meta, err := adm.metadata(ctx, []string{})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	brokers := meta.Brokers
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].NodeID < brokers[j].NodeID })
	for _, b := range brokers {
		rack := "null"
		if b.Rack != nil {
			rack = *b.Rack
		}
		node := fmt.Sprintf("%s (id: %d rack: %s)", net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), b.NodeID, rack)
		versions, err := brokerVersions(ctx, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), opts)
		if err != nil {
			fmt.Fprintf(stdout, "%s -> ERROR: %v\n", node, err)
			continue
		}
		fmt.Fprintf(stdout, "%s -> %s\n", node, formatVersions(versions))
	}
	return 0
}

// brokerVersions asks one broker, at addr, for its ApiVersions.
func brokerVersions(ctx context.Context, addr string, opts []kgo.Opt) (*kmsg.ApiVersionsResponse, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		return nil, err
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if err := kafkaError(av.ErrorCode, nil); err != nil {
		return nil, err
	}
	return av, nil
}

// formatVersions is Kafka's NodeApiVersions.toString(true): every key the
// broker serves and every client key Kafka 3.7 knows, in key order.
func formatVersions(resp *kmsg.ApiVersionsResponse) string {
	served := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range resp.ApiKeys {
		served[k.ApiKey] = k
	}
	keys := map[int16]bool{}
	for k := range served {
		keys[k] = true
	}
	for k := int16(0); k <= kafka37LastKey; k++ {
		if !controllerOnlyAPIs[k] {
			keys[k] = true
		}
	}
	sorted := make([]int, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, int(k))
	}
	sort.Ints(sorted)
	lines := make([]string, 0, len(sorted))
	for _, k := range sorted {
		lines = append(lines, versionLine(int16(k), served))
	}
	return "(\n\t" + strings.Join(lines, ",\n\t") + "\n)"
}

func versionLine(key int16, served map[int16]kmsg.ApiVersionsResponseApiKey) string {
	name := apiName(key)
	req := kmsg.RequestForKey(key)
	if req == nil {
		name = "UNKNOWN"
	}
	v, ok := served[key]
	if !ok {
		return fmt.Sprintf("%s(%d): UNSUPPORTED", name, key)
	}
	line := fmt.Sprintf("%s(%d): %d", name, key, v.MinVersion)
	if v.MinVersion != v.MaxVersion {
		line = fmt.Sprintf("%s(%d): %d to %d", name, key, v.MinVersion, v.MaxVersion)
	}
	if req == nil {
		return line
	}
	switch newest := req.MaxVersion(); {
	case newest < v.MinVersion:
		return line + " [unusable: node too new]"
	default:
		return line + fmt.Sprintf(" [usable: %d]", min(newest, v.MaxVersion))
	}
}
