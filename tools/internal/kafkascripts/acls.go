package kafkascripts

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaClusterName is Kafka's name of the one Cluster resource.
const kafkaClusterName = "kafka-cluster"

// aclsRun is one kafka-acls.sh run: what its flags ask for.
type aclsRun struct {
	fs                                           *pflag.FlagSet
	bootstrap, commandConfig, patternType        string
	add, remove, list, cluster, force            bool
	producer, consumer, idempotent               bool
	topics, groups, allowP, denyP, allowH, denyH []string
	ops, principals                              []string
	stdin                                        io.Reader
}

// aclPattern is a resource pattern (a filter's when listing or removing).
type aclPattern struct {
	typ     kmsg.ACLResourceType
	name    string
	pattern kmsg.ACLResourcePatternType
}

func (p aclPattern) String() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", p.typ, p.name, p.pattern)
}

// aclEntry is Kafka's AccessControlEntry.
type aclEntry struct {
	principal, host string
	op              kmsg.ACLOperation
	perm            kmsg.ACLPermissionType
}

func (e aclEntry) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", e.principal, e.host, e.op, e.perm)
}

// ACLs is kafka-acls.sh (Kafka 3.7's AclCommand with --bootstrap-server):
// add, remove or list ACL bindings, sent to the bootstrap broker, which
// forwards changes to the active controller; they are stored in etcd and
// in force on every broker. Output is Kafka's tool's.
func ACLs(args []string, stdout, stderr io.Writer) int {
	r, err := parseACLsFlags(args)
	if code, done := parseOutcome(err, "This tool helps to manage acls on kafka.", func() string {
		if r == nil {
			return ""
		}
		return r.fs.FlagUsages()
	}, stdout, stderr, nil); done {
		return code
	}
	r.stdin = os.Stdin
	if err := r.run(stdout); err != nil {
		fmt.Fprintf(stderr, "Error while executing ACL command: %s\n", err)
		return 1
	}
	return 0
}

func aclsFlags(r *aclsRun) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kafka-acls.sh", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&r.bootstrap, "bootstrap-server", "", "REQUIRED: a broker's Kafka listener, host:port; several comma-separated are tried in order")
	fs.StringVar(&r.commandConfig, "command-config", "", "a properties file of client settings (security.protocol, ssl.*)")
	fs.BoolVar(&r.add, "add", false, "add ACLs")
	fs.BoolVar(&r.remove, "remove", false, "remove ACLs")
	fs.BoolVar(&r.list, "list", false, "list ACLs")
	fs.StringArrayVar(&r.topics, "topic", nil, "topic to which ACLs should be added or removed; * is every topic")
	fs.StringArrayVar(&r.groups, "group", nil, "consumer group to which ACLs should be added or removed; * is every group")
	fs.BoolVar(&r.cluster, "cluster", false, "add or remove cluster ACLs")
	fs.StringVar(&r.patternType, "resource-pattern-type", "", "LITERAL or PREFIXED (default LITERAL); to list or remove also ANY (the default for --list) or MATCH")
	fs.StringArrayVar(&r.allowP, "allow-principal", nil, "principal in PrincipalType:name form to allow (repeatable)")
	fs.StringArrayVar(&r.denyP, "deny-principal", nil, "principal in PrincipalType:name form to deny (repeatable)")
	fs.StringArrayVar(&r.allowH, "allow-host", nil, "host the allowed principals may connect from (default * when --allow-principal is given)")
	fs.StringArrayVar(&r.denyH, "deny-host", nil, "host the denied principals may not connect from (default * when --deny-principal is given)")
	fs.StringArrayVar(&r.ops, "operation", nil, "Read, Write, Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs, IdempotentWrite or All (default All)")
	fs.StringArrayVar(&r.principals, "principal", nil, "with --list, only the ACLs of this principal")
	fs.BoolVar(&r.producer, "producer", false, "convenience: WRITE, DESCRIBE and CREATE on the topics")
	fs.BoolVar(&r.consumer, "consumer", false, "convenience: READ and DESCRIBE on the topics, READ on the group")
	fs.BoolVar(&r.idempotent, "idempotent", false, "with --producer, IDEMPOTENT_WRITE on the cluster")
	fs.BoolVar(&r.force, "force", false, "assume yes to every prompt")
	fs.Bool("help", false, "print usage information")
	return fs
}

// parseACLsFlags checks the flags as AclCommand's option checks do.
func parseACLsFlags(args []string) (*aclsRun, error) {
	r := &aclsRun{}
	r.fs = aclsFlags(r)
	if len(args) == 0 {
		return r, usageError{"This tool helps to manage acls on kafka."}
	}
	if err := parseKafkaFlags(r.fs, args); err != nil {
		return r, err
	}
	if h, _ := r.fs.GetBool("help"); h {
		return r, pflag.ErrHelp
	}
	if r.fs.NArg() > 0 {
		return r, fmt.Errorf("Found non-option arguments: %s", strings.Join(r.fs.Args(), " "))
	}
	if err := requireOption(r.fs, "bootstrap-server"); err != nil {
		return r, err
	}
	actions := 0
	for _, b := range []bool{r.add, r.remove, r.list} {
		if b {
			actions++
		}
	}
	if actions != 1 {
		return r, usageError{"Command must include exactly one action: --list, --add, --remove. "}
	}
	if err := refuseWith(r.fs, "list", "producer", "consumer", "allow-host", "allow-principal", "deny-host", "deny-principal"); err != nil {
		return r, err
	}
	if (r.producer || r.consumer) && (len(r.ops) > 0 || len(r.denyP) > 0) {
		return r, usageError{"With --producer or --consumer, --operation and --deny-principal are not allowed."}
	}
	if r.producer && len(r.topics) == 0 {
		return r, usageError{"With --producer you must specify a --topic"}
	}
	if r.consumer && (len(r.topics) == 0 || len(r.groups) == 0) {
		return r, usageError{"With --consumer you must specify a --topic and a --group and no --cluster option should be specified."}
	}
	if r.idempotent && !r.producer {
		return r, usageError{"The --idempotent option is only available if --producer is set"}
	}
	if r.patternType == "" {
		r.patternType = "LITERAL"
		if r.list {
			r.patternType = "ANY"
		}
	}
	pt, err := kmsg.ParseACLResourcePatternType(r.patternType)
	if err != nil || pt == kmsg.ACLResourcePatternTypeUnknown {
		return r, usageError{fmt.Sprintf("Invalid resource pattern type %s", r.patternType)}
	}
	if r.add && (pt == kmsg.ACLResourcePatternTypeAny || pt == kmsg.ACLResourcePatternTypeMatch) {
		return r, usageError{fmt.Sprintf("A '--resource-pattern-type' value of '%s' is not valid when adding acls.", pt)}
	}
	if len(r.topics) == 0 && len(r.groups) == 0 && !r.cluster && !r.list {
		return r, usageError{"You must provide at least one resource: --topic <topic> or --cluster or --group <group>"}
	}
	for _, op := range r.ops {
		if o, err := kmsg.ParseACLOperation(op); err != nil || o == kmsg.ACLOperationUnknown || o == kmsg.ACLOperationAny {
			return r, usageError{fmt.Sprintf("Invalid operation %s", op)}
		}
	}
	return r, nil
}

// resources are the patterns the flags name, with the operations each gets.
func (r *aclsRun) resources() []aclPattern {
	pt, _ := kmsg.ParseACLResourcePatternType(r.patternType)
	var out []aclPattern
	for _, t := range r.topics {
		out = append(out, aclPattern{kmsg.ACLResourceTypeTopic, t, pt})
	}
	for _, g := range r.groups {
		out = append(out, aclPattern{kmsg.ACLResourceTypeGroup, g, pt})
	}
	if r.cluster || r.idempotent {
		out = append(out, aclPattern{kmsg.ACLResourceTypeCluster, kafkaClusterName, pt})
	}
	return out
}

// opsFor are the operations a resource gets: --operation's (All by
// default), or the --producer / --consumer sets.
func (r *aclsRun) opsFor(typ kmsg.ACLResourceType) []kmsg.ACLOperation {
	if r.producer || r.consumer {
		var ops []kmsg.ACLOperation
		switch typ {
		case kmsg.ACLResourceTypeTopic:
			if r.producer {
				ops = append(ops, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe, kmsg.ACLOperationCreate)
			}
			if r.consumer {
				ops = append(ops, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe)
			}
		case kmsg.ACLResourceTypeGroup:
			if r.consumer {
				ops = append(ops, kmsg.ACLOperationRead)
			}
		case kmsg.ACLResourceTypeCluster:
			if r.idempotent {
				ops = append(ops, kmsg.ACLOperationIdempotentWrite)
			}
		}
		return dedupOps(ops)
	}
	if len(r.ops) == 0 {
		return []kmsg.ACLOperation{kmsg.ACLOperationAll}
	}
	var ops []kmsg.ACLOperation
	for _, s := range r.ops {
		o, _ := kmsg.ParseACLOperation(s)
		ops = append(ops, o)
	}
	return dedupOps(ops)
}

func dedupOps(ops []kmsg.ACLOperation) []kmsg.ACLOperation {
	var out []kmsg.ACLOperation
	seen := map[kmsg.ACLOperation]bool{}
	for _, o := range ops {
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// entries are the entries the flags name for a resource.
func (r *aclsRun) entries(typ kmsg.ACLResourceType) []aclEntry {
	var out []aclEntry
	for _, side := range []struct {
		principals, hosts []string
		perm              kmsg.ACLPermissionType
	}{{r.allowP, r.allowH, kmsg.ACLPermissionTypeAllow}, {r.denyP, r.denyH, kmsg.ACLPermissionTypeDeny}} {
		hosts := side.hosts
		if len(hosts) == 0 {
			hosts = []string{"*"}
		}
		for _, p := range side.principals {
			for _, h := range hosts {
				for _, op := range r.opsFor(typ) {
					out = append(out, aclEntry{p, h, op, side.perm})
				}
			}
		}
	}
	return out
}

func (r *aclsRun) run(stdout io.Writer) error {
	opts, err := commandConfig(r.commandConfig)
	if err != nil {
		return err
	}
	a, err := newSeedAdmin(splitBootstrap(r.bootstrap), opts)
	if err != nil {
		return err
	}
	defer a.close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	switch {
	case r.add:
		return r.runAdd(ctx, a, stdout)
	case r.remove:
		return r.runRemove(ctx, a, stdout)
	}
	return r.runList(ctx, a, stdout)
}

func printACLs(out io.Writer, heading string, p aclPattern, es []aclEntry) {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = "\t" + e.String()
	}
	fmt.Fprintf(out, "%s `%s`: \n %s \n\n", heading, p, strings.Join(lines, "\n"))
}

func (r *aclsRun) runAdd(ctx context.Context, a *seedAdmin, out io.Writer) error {
	for _, p := range r.resources() {
		es := r.entries(p.typ)
		if len(es) == 0 {
			continue
		}
		printACLs(out, "Adding ACLs for resource", p, es)
		req := kmsg.NewPtrCreateACLsRequest()
		for _, e := range es {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = p.typ, p.name, p.pattern
			c.Principal, c.Host, c.Operation, c.PermissionType = e.principal, e.host, e.op, e.perm
			req.Creations = append(req.Creations, c)
		}
		resp, err := a.request(ctx, req)
		if err != nil {
			return err
		}
		for _, res := range resp.(*kmsg.CreateACLsResponse).Results {
			if err := kafkaError(res.ErrorCode, res.ErrorMessage); err != nil {
				return err
			}
		}
	}
	return r.runList(ctx, a, out)
}

func (r *aclsRun) runRemove(ctx context.Context, a *seedAdmin, out io.Writer) error {
	for _, p := range r.resources() {
		es := r.entries(p.typ)
		if !r.force && !r.confirm(out, p, es) {
			continue
		}
		req := kmsg.NewPtrDeleteACLsRequest()
		filter := func() kmsg.DeleteACLsRequestFilter {
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType = p.typ, kmsg.StringPtr(p.name), p.pattern
			f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return f
		}
		if len(es) == 0 { // every ACL of the resource
			req.Filters = append(req.Filters, filter())
		}
		for _, e := range es {
			f := filter()
			f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(e.principal), kmsg.StringPtr(e.host), e.op, e.perm
			req.Filters = append(req.Filters, f)
		}
		resp, err := a.request(ctx, req)
		if err != nil {
			return err
		}
		for _, res := range resp.(*kmsg.DeleteACLsResponse).Results {
			if err := kafkaError(res.ErrorCode, res.ErrorMessage); err != nil {
				return err
			}
		}
	}
	return r.runList(ctx, a, out)
}

// confirm is Kafka's prompt before a removal; only y goes on.
func (r *aclsRun) confirm(out io.Writer, p aclPattern, es []aclEntry) bool {
	if len(es) == 0 {
		fmt.Fprintf(out, "Are you sure you want to delete all ACLs for resource filter `%s`? (y/n)\n", p)
	} else {
		lines := make([]string, len(es))
		for i, e := range es {
			lines[i] = "\t" + e.String()
		}
		fmt.Fprintf(out, "Are you sure you want to remove ACLs: \n %s \n from resource filter `%s`? (y/n)\n", strings.Join(lines, "\n"), p)
	}
	line, _ := bufio.NewReader(r.stdin).ReadString('\n')
	return strings.EqualFold(strings.TrimSpace(line), "y")
}

func (r *aclsRun) runList(ctx context.Context, a *seedAdmin, out io.Writer) error {
	filters := r.resources()
	if len(filters) == 0 {
		pt, _ := kmsg.ParseACLResourcePatternType(r.patternType)
		filters = []aclPattern{{kmsg.ACLResourceTypeAny, "", pt}}
	}
	principals := r.principals
	if len(principals) == 0 {
		principals = []string{""}
	}
	type group struct {
		p  aclPattern
		es []aclEntry
	}
	byPattern := map[string]*group{}
	for _, f := range filters {
		for _, principal := range principals {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = f.typ, f.pattern
			if f.typ != kmsg.ACLResourceTypeAny {
				req.ResourceName = kmsg.StringPtr(f.name)
			}
			if principal != "" {
				req.Principal = kmsg.StringPtr(principal)
			}
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := a.request(ctx, req)
			if err != nil {
				return err
			}
			d := resp.(*kmsg.DescribeACLsResponse)
			if err := kafkaError(d.ErrorCode, d.ErrorMessage); err != nil {
				return err
			}
			for _, res := range d.Resources {
				p := aclPattern{res.ResourceType, res.ResourceName, res.ResourcePatternType}
				g := byPattern[p.String()]
				if g == nil {
					g = &group{p: p}
					byPattern[p.String()] = g
				}
				for _, e := range res.ACLs {
					g.es = append(g.es, aclEntry{e.Principal, e.Host, e.Operation, e.PermissionType})
				}
			}
		}
	}
	keys := make([]string, 0, len(byPattern))
	for k := range byPattern {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := byPattern[k]
		heading := "Current ACLs for resource"
		if len(r.principals) > 0 {
			heading = "ACLs for principal `" + strings.Join(r.principals, ",") + "`\nCurrent ACLs for resource"
		}
		printACLs(out, heading, g.p, g.es)
	}
	return nil
}
