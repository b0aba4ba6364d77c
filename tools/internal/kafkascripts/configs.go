package kafkascripts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// configsRun is what kafka-configs.sh's flags ask for.
type configsRun struct {
	fs                       *pflag.FlagSet
	bootstrap, commandConfig string
	// typeFlags and nameFlags are --entity-type and --entity-name or
	// --entity-default (as "") in command-line order.
	typeFlags, nameFlags []string
	// shortcut holds the entity shortcuts' values (--topic, --user, ...).
	shortcut                 map[string]*string
	addConfig, addConfigFile string
	deleteConfigs            []string
	describe, alter, all     bool
	// entityTypes and entityNames are Kafka's ConfigCommandOptions
	// entityTypes and entityNames: the --entity-* flags, then the
	// shortcuts in Kafka's order; a default entity's name is "".
	entityTypes, entityNames []string
}

// configsEntityTypes are the types Kafka's tool takes with
// --bootstrap-server; tidemark's listener has configs for topics and
// brokers, users' SCRAM credentials and users' and clients' quotas.
var configsEntityTypes = []string{"topics", "clients", "users", "brokers", "broker-loggers", "ips", "client-metrics"}

// entityShortcuts are Kafka's entity flags (ConfigCommandOptions'
// entityFlags), in the order Kafka adds them to the entity types.
var entityShortcuts = []struct{ flag, typ, usage string }{
	{"topic", "topics", "the topic's name (--entity-type topics --entity-name)"},
	{"client", "clients", "the client's ID (--entity-type clients --entity-name)"},
	{"user", "users", "the user's principal name (--entity-type users --entity-name)"},
	{"broker", "brokers", "the broker's ID (--entity-type brokers --entity-name)"},
	{"broker-logger", "broker-loggers", "the broker's ID for its logger config (not served by tidemark)"},
	{"ip", "ips", "the IP address (not served by tidemark)"},
}

// defaultShortcuts are Kafka's entityDefaultsFlags, in its order.
var defaultShortcuts = []struct{ flag, typ, usage string }{
	{"client-defaults", "clients", "the config defaults for all clients (--entity-type clients --entity-default)"},
	{"user-defaults", "users", "the config defaults for all users (--entity-type users --entity-default)"},
	{"broker-defaults", "brokers", "the config defaults for all brokers (--entity-type brokers --entity-default)"},
	{"ip-defaults", "ips", "the config defaults for all IPs (not served by tidemark)"},
}

// orderedEntityNames records --entity-name and --entity-default in the
// order given, which pairs them with the --entity-type flags.
type orderedEntityNames struct {
	names     *[]string
	isDefault bool
}

func (o orderedEntityNames) Set(v string) error {
	if o.isDefault {
		if v != "true" {
			return errors.New("it takes no argument")
		}
		v = ""
	}
	*o.names = append(*o.names, v)
	return nil
}

func (o orderedEntityNames) String() string { return "" }

func (o orderedEntityNames) Type() string {
	if o.isDefault {
		return "bool"
	}
	return "string"
}

func configsFlags(r *configsRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-configs.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "the Kafka server to connect to (host:port, several comma-separated)")
	fs.StringVar(&r.commandConfig, "command-config", "", "a properties file of client settings (security.protocol=SSL and PEM ssl.truststore.*/ssl.keystore.*)")
	fs.BoolVar(&r.describe, "describe", false, "list configs for the given entity")
	fs.BoolVar(&r.alter, "alter", false, "alter the configuration of the entity")
	fs.StringArrayVar(&r.typeFlags, "entity-type", nil, "type of entity: topics, brokers, users or clients (users and clients may be given together)")
	fs.Var(orderedEntityNames{names: &r.nameFlags}, "entity-name", "name of entity (topic name, broker id, user name or client id), one per --entity-type in order")
	fs.Var(orderedEntityNames{names: &r.nameFlags, isDefault: true}, "entity-default", "the cluster-wide default for brokers; the default entity for users and clients (in --entity-type order)")
	fs.Lookup("entity-default").NoOptDefVal = "true"
	fs.StringVar(&r.addConfig, "add-config", "", "key=val pairs, comma-separated, to add; a list value in square brackets: k1=v1,k2=[v1,v2,v2]")
	fs.StringVar(&r.addConfigFile, "add-config-file", "", "a properties file of configs to add")
	fs.StringSliceVar(&r.deleteConfigs, "delete-config", nil, "config keys to remove, comma-separated")
	fs.BoolVar(&r.all, "all", false, "with --describe, every config, not only the dynamic ones")
	r.shortcut = map[string]*string{}
	for _, s := range entityShortcuts {
		r.shortcut[s.flag] = fs.String(s.flag, "", s.usage)
	}
	for _, s := range defaultShortcuts {
		fs.Bool(s.flag, false, s.usage)
	}
	fs.BoolP("help", "h", false, "print usage information")
	return fs
}

func configsUsage() string {
	var r configsRun
	return "Option:\n" + configsFlags(&r).FlagUsages()
}

// Configs is kafka-configs.sh (Kafka 3.7's ConfigCommand) for topics,
// brokers, users' SCRAM credentials and users' and clients' quotas:
// --describe (dynamic configs, or --all), --alter with --add-config and
// --delete-config, with Kafka's output lines and refusals. Ips (connection
// quotas) and client metrics are refused by name.
func Configs(args []string, stdout, stderr io.Writer) int {
	r, err := parseConfigsFlags(args)
	if code, done := parseOutcome(err, "This tool helps to manipulate and describe entity config for a topic, client, user, broker, ip or client-metrics", configsUsage, stdout, stderr, nil); done {
		return code
	}
	var refused *configRefusal
	if err := r.run(stdout); errors.As(err, &refused) {
		fmt.Fprintln(stderr, refused.msg)
		return 1
	} else if err != nil {
		fmt.Fprintf(stderr, "Error while executing config command with args '%s'\n", strings.Join(args, " "))
		fmt.Fprintf(stderr, "java.util.concurrent.ExecutionException: %s\n", err)
		return 1
	}
	return 0
}

// configRefusal is an IllegalArgumentException or
// InvalidConfigurationException of Kafka's tool: its message alone.
type configRefusal struct{ msg string }

func (e *configRefusal) Error() string { return e.msg }

func parseConfigsFlags(args []string) (*configsRun, error) {
	if len(args) == 0 {
		return nil, usageError{"This tool helps to manipulate and describe entity config for a topic, client, user, broker, ip or client-metrics"}
	}
	r := &configsRun{}
	fs := configsFlags(r)
	r.fs = fs
	if err := parseKafkaFlags(fs, args); err != nil {
		return nil, err
	}
	if h, _ := fs.GetBool("help"); h {
		return nil, pflag.ErrHelp
	}
	if fs.Changed("describe") == fs.Changed("alter") {
		return nil, usageError{"Command must include exactly one action: --describe, --alter"}
	}
	for _, c := range [][]string{{"alter", "describe"}, {"describe", "alter", "add-config", "delete-config"}} {
		if err := refuseWith(fs, c[0], c[1:]...); err != nil {
			return nil, err
		}
	}
	shortcuts := r.collectEntities()
	if dups := repeatedTypes(r.entityTypes); len(dups) > 0 {
		return nil, fmt.Errorf("Duplicate entity type(s) specified: %s", strings.Join(dups, ","))
	}
	for _, t := range r.entityTypes {
		if !containsString(configsEntityTypes, t) {
			return nil, fmt.Errorf("Invalid entity type %s, the entity type must be one of %s with a --bootstrap-server or --bootstrap-controller argument", t, strings.Join(configsEntityTypes, ", "))
		}
	}
	if len(r.entityTypes) == 0 {
		return nil, errors.New("At least one entity type must be specified")
	}
	usersAndClients := len(r.entityTypes) == 2 && containsString(r.entityTypes, "users") && containsString(r.entityTypes, "clients")
	if len(r.entityTypes) > 1 && !usersAndClients {
		return nil, errors.New("Only 'users' and 'clients' entity types may be specified together")
	}
	if shortcuts && (fs.Changed("entity-type") || fs.Changed("entity-name") || fs.Changed("entity-default")) {
		return nil, errors.New("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
	}
	if !fs.Changed("bootstrap-server") {
		return nil, errors.New("One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments must be specified")
	}
	hasName, hasDefault := false, false
	for _, n := range r.entityNames {
		hasName, hasDefault = hasName || n != "", hasDefault || n == ""
	}
	if hasName && (containsString(r.entityTypes, "brokers") || containsString(r.entityTypes, "broker-loggers")) {
		// Kafka checks the first --entity-name and the broker shortcuts.
		var ids []string
		for _, n := range r.nameFlags {
			if n != "" {
				ids = append(ids, n)
				break
			}
		}
		for _, f := range []string{"broker", "broker-logger"} {
			if fs.Changed(f) {
				ids = append(ids, *r.shortcut[f])
			}
		}
		for _, id := range ids {
			if _, err := strconv.ParseInt(id, 10, 32); err != nil {
				return nil, fmt.Errorf("The entity name for %s must be a valid integer broker id, but it is: %s", r.entityTypes[0], id)
			}
		}
	}
	typ := r.entityTypes[0]
	switch typ {
	case "topics", "brokers", "users", "clients":
	default:
		return nil, fmt.Errorf("--entity-type %s: tidemark's kafka-configs.sh manages topics, brokers, users and clients only (ip quotas and client metrics are not served here)", typ)
	}
	if r.describe && typ == "topics" && len(r.entityNames) > 0 && r.entityNames[0] == "" {
		return nil, errors.New("--entity-default must not be specified with --entity-type topics")
	}
	if r.alter {
		if typ != "topics" && !hasName && !hasDefault {
			return nil, errors.New("an entity-name or default entity must be specified with --alter of users, clients, brokers or ips")
		}
		if typ == "topics" && !hasName {
			return nil, errors.New("an entity name must be specified with --alter of topics")
		}
		if fs.Changed("add-config") && fs.Changed("add-config-file") {
			return nil, errors.New("Only one of --add-config or --add-config-file must be specified")
		}
		if !fs.Changed("add-config") && !fs.Changed("add-config-file") && !fs.Changed("delete-config") {
			return nil, errors.New("At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter")
		}
	}
	return r, nil
}

// collectEntities sets entityTypes and entityNames as Kafka's tool makes
// them: the --entity-* flags first, then the shortcuts given, each in
// Kafka's order (so --user alice --client app is clients app, users
// alice). It reports whether any shortcut was given.
func (r *configsRun) collectEntities() bool {
	r.entityTypes = append([]string{}, r.typeFlags...)
	r.entityNames = append([]string{}, r.nameFlags...)
	any := false
	for _, s := range entityShortcuts {
		if r.fs.Changed(s.flag) {
			r.entityTypes = append(r.entityTypes, s.typ)
			r.entityNames = append(r.entityNames, *r.shortcut[s.flag])
			any = true
		}
	}
	for _, s := range defaultShortcuts {
		if r.fs.Changed(s.flag) {
			r.entityTypes = append(r.entityTypes, s.typ)
			r.entityNames = append(r.entityNames, "")
			any = true
		}
	}
	return any
}

// repeatedTypes is Scala's xs.diff(xs.distinct): each repeat after an
// element's first occurrence, in order.
func repeatedTypes(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if seen[x] {
			out = append(out, x)
		}
		seen[x] = true
	}
	return out
}

// bracketStrip takes a list value's square brackets off, as Kafka does.
var bracketStrip = regexp.MustCompile(`\[?\]?`)

// splitOutsideBrackets splits s at sep where no [ ] pair is open.
func splitOutsideBrackets(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// configsToAdd are --add-config's (or --add-config-file's) pairs.
func (r *configsRun) configsToAdd() (map[string]string, error) {
	out := map[string]string{}
	if r.addConfigFile != "" {
		props, err := readProperties(r.addConfigFile)
		if err != nil {
			return nil, err
		}
		for k, v := range props {
			out[k] = v
		}
	}
	if r.fs.Changed("add-config") {
		for _, pair := range splitOutsideBrackets(r.addConfig, ',') {
			kv := splitOutsideBrackets(pair, '=')
			if len(kv) != 2 {
				return nil, &configRefusal{`requirement failed: Invalid entity config: all configs to be added must be in the format "key=val".`}
			}
			out[strings.TrimSpace(kv[0])] = strings.TrimSpace(bracketStrip.ReplaceAllString(kv[1], ""))
		}
	}
	return out, nil
}

func (r *configsRun) run(stdout io.Writer) error {
	opts, err := commandConfig(r.commandConfig)
	if err != nil {
		return &configRefusal{err.Error()}
	}
	adm, err := newSeedAdmin(splitBootstrap(r.bootstrap), opts)
	if err != nil {
		return err
	}
	defer adm.close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	typ := r.entityTypes[0]
	switch {
	case typ == "users" || typ == "clients":
		return r.runUsersAndClients(ctx, adm, stdout)
	case r.alter:
		return r.alterConfigs(ctx, adm, typ, r.entityNames[0], stdout)
	}
	var entities []string
	switch {
	case len(r.entityNames) > 0:
		entities = r.entityNames[:1]
	case typ == "topics":
		meta, err := adm.metadata(ctx, nil)
		if err != nil {
			return err
		}
		for _, t := range meta.Topics {
			if t.Topic != nil && t.ErrorCode == 0 {
				entities = append(entities, *t.Topic)
			}
		}
		sort.Strings(entities)
	default:
		meta, err := adm.metadata(ctx, []string{})
		if err != nil {
			return err
		}
		for _, b := range meta.Brokers {
			entities = append(entities, strconv.Itoa(int(b.NodeID)))
		}
		sort.Strings(entities)
		entities = append(entities, "")
	}
	for _, e := range entities {
		switch {
		case e == "":
			fmt.Fprintf(stdout, "Default configs for %s in the cluster are:\n", typ)
		case r.all:
			fmt.Fprintf(stdout, "All configs for %s %s are:\n", strings.TrimSuffix(typ, "s"), e)
		default:
			fmt.Fprintf(stdout, "Dynamic configs for %s %s are:\n", strings.TrimSuffix(typ, "s"), e)
		}
		entries, err := describeResourceConfig(ctx, adm, typ, e, r.all)
		if err != nil {
			return err
		}
		for _, c := range entries {
			var syn []string
			for _, s := range c.ConfigSynonyms {
				syn = append(syn, fmt.Sprintf("%s:%s=%s", configSourceName(s.Source), s.Name, nullString(s.Value)))
			}
			fmt.Fprintf(stdout, "  %s=%s sensitive=%t synonyms={%s}\n", c.Name, nullString(c.Value), c.IsSensitive, strings.Join(syn, ", "))
		}
	}
	return nil
}

func nullString(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// configSourceName is the Java client's ConfigSource name.
func configSourceName(s kmsg.ConfigSource) string {
	switch s {
	case 1:
		return "DYNAMIC_TOPIC_CONFIG"
	case 2:
		return "DYNAMIC_BROKER_CONFIG"
	case 3:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case 4:
		return "STATIC_BROKER_CONFIG"
	case 5:
		return "DEFAULT_CONFIG"
	case 6:
		return "DYNAMIC_BROKER_LOGGER_CONFIG"
	case 7:
		return "CLIENT_METRICS_CONFIG"
	}
	return "UNKNOWN"
}

// describeResourceConfig is ConfigCommand.getResourceConfig: the entity's
// configs, only those set dynamically at its own level unless all, sorted
// by name.
func describeResourceConfig(ctx context.Context, adm *seedAdmin, typ, name string, all bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	rtype, source := kmsg.ConfigResourceTypeTopic, kmsg.ConfigSource(1)
	if typ == "brokers" {
		rtype, source = kmsg.ConfigResourceTypeBroker, 2
		if name == "" {
			source = 3
		} else if _, err := strconv.ParseInt(name, 10, 32); err != nil {
			return nil, &configRefusal{fmt.Sprintf("The entity name for %s must be a valid integer broker id, found: %s", typ, name)}
		}
	} else if err := validTopicName(name); err != nil {
		return nil, &configRefusal{err.Error()}
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = rtype, name
	req.Resources = append(req.Resources, rr)
	req.IncludeSynonyms = true
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("org.apache.kafka.common.KafkaException: DescribeConfigs answered %d resources for one", len(resp.Resources))
	}
	res := resp.Resources[0]
	if res.ErrorCode != 0 {
		return nil, errors.New(javaExceptionWith(res.ErrorCode, res.ErrorMessage))
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, c := range res.Configs {
		if all || c.Source == source {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// javaExceptionWith is javaException with the broker's message, when it
// sent one, in place of the code's description.
func javaExceptionWith(code int16, message *string) string {
	s := javaException(kerr.ErrorForCode(code))
	if message != nil && *message != "" {
		class, _, _ := strings.Cut(s, ": ")
		return class + ": " + *message
	}
	return s
}

// validTopicName is Kafka's Topic.validate.
func validTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("Topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return errors.New("Topic name cannot be \".\" or \"..\"")
	case len(name) > 249:
		return fmt.Errorf("Topic name is illegal, it can't be longer than 249 characters, topic name: %s", name)
	case !regexp.MustCompile(`^[a-zA-Z0-9._-]+$`).MatchString(name):
		return fmt.Errorf("Topic name \"%s\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
	}
	return nil
}

// alterConfigs is ConfigCommand.alterConfig for topics and brokers: a
// key to delete must be set now; then a topic's changes go as one
// IncrementalAlterConfigs, a broker's as its whole new set of dynamic
// configs in one AlterConfigs (what Kafka 3.7's tool sends), which
// removes every dynamic config it leaves out.
func (r *configsRun) alterConfigs(ctx context.Context, adm *seedAdmin, typ, name string, stdout io.Writer) error {
	add, err := r.configsToAdd()
	if err != nil {
		return err
	}
	var del []string
	for _, d := range r.deleteConfigs {
		del = append(del, strings.TrimSpace(d))
	}
	old, err := describeResourceConfig(ctx, adm, typ, name, false)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	for _, c := range old {
		set[c.Name] = true
	}
	var invalid []string
	for _, d := range del {
		if !set[d] {
			invalid = append(invalid, d)
		}
	}
	if len(invalid) > 0 {
		return &configRefusal{"Invalid config(s): " + strings.Join(invalid, ",")}
	}
	if typ == "brokers" {
		err = alterBrokerWholeSet(ctx, adm, name, old, add, del)
	} else {
		err = alterTopicIncrementally(ctx, adm, name, add, del)
	}
	if err != nil {
		return err
	}
	if name == "" {
		fmt.Fprintf(stdout, "Completed updating default config for %s in the cluster.\n", typ)
	} else {
		fmt.Fprintf(stdout, "Completed updating config for %s %s.\n", strings.TrimSuffix(typ, "s"), name)
	}
	return nil
}

func sortedConfigNames(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func alterTopicIncrementally(ctx context.Context, adm *seedAdmin, name string, add map[string]string, del []string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, name
	for _, k := range sortedConfigNames(add) {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(add[k])
		rr.Configs = append(rr.Configs, c)
	}
	for _, k := range del {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpDelete, kmsg.StringPtr("")
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, res := range kresp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if res.ErrorCode != 0 {
			return errors.New(javaExceptionWith(res.ErrorCode, res.ErrorMessage))
		}
	}
	return nil
}

// alterBrokerWholeSet sends the broker's (or the cluster default's)
// dynamic configs now, with add set and del removed, as its whole set.
func alterBrokerWholeSet(ctx context.Context, adm *seedAdmin, name string, old []kmsg.DescribeConfigsResponseResourceConfig, add map[string]string, del []string) error {
	next := map[string]string{}
	for _, c := range old {
		next[c.Name] = nullString(c.Value)
	}
	for k, v := range add {
		next[k] = v
	}
	for _, k := range del {
		delete(next, k)
	}
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
	for _, k := range sortedConfigNames(next) {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(next[k])
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, res := range kresp.(*kmsg.AlterConfigsResponse).Resources {
		if res.ErrorCode != 0 {
			return errors.New(javaExceptionWith(res.ErrorCode, res.ErrorMessage))
		}
	}
	return nil
}
