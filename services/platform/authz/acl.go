package authz

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"tidemark.io/services/platform/identity"
)

// Operation is what a principal does to a resource (Kafka's AclOperation).
type Operation int

// The operations. InjectFault is tidemark's own: the fault-injection API.
const (
	Read Operation = iota + 1
	Write
	Create
	Delete
	Alter
	Describe
	AlterConfigs
	DescribeConfigs
	IdempotentWrite
	InjectFault
	All
)

var opNames = map[Operation]string{
	Read: "Read", Write: "Write", Create: "Create", Delete: "Delete", Alter: "Alter",
	Describe: "Describe", AlterConfigs: "AlterConfigs", DescribeConfigs: "DescribeConfigs",
	IdempotentWrite: "IdempotentWrite", InjectFault: "InjectFault", All: "All",
}

func (o Operation) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("Operation(%d)", int(o))
}

// ResourceType is the kind of thing an ACL guards.
type ResourceType int

const (
	Topic ResourceType = iota + 1
	Cluster
	// Group is a consumer group, named by its group id.
	Group
)

func (t ResourceType) String() string {
	switch t {
	case Topic:
		return "Topic"
	case Cluster:
		return "Cluster"
	case Group:
		return "Group"
	}
	return fmt.Sprintf("ResourceType(%d)", int(t))
}

// validOps are the operations that mean something on each resource type, as
// in Kafka (plus InjectFault on the cluster); an ACL naming another is a
// mistake worth refusing at load time.
var validOps = map[ResourceType][]Operation{
	Topic:   {Read, Write, Create, Delete, Alter, Describe, AlterConfigs, DescribeConfigs, All},
	Cluster: {Create, Alter, Describe, AlterConfigs, DescribeConfigs, IdempotentWrite, InjectFault, All},
	Group:   {Read, Delete, Describe, All},
}

// Resource is one named resource a request touches.
type Resource struct {
	Type ResourceType
	Name string
}

// ClusterName is the name of the one Cluster resource.
const ClusterName = "cluster"

// TheCluster is the Cluster resource.
var TheCluster = Resource{Type: Cluster, Name: ClusterName}

// TopicNamed is the Topic resource called name.
func TopicNamed(name string) Resource { return Resource{Type: Topic, Name: name} }

// GroupNamed is the Group resource of the consumer group id.
func GroupNamed(id string) Resource { return Resource{Type: Group, Name: id} }

func (r Resource) String() string { return r.Type.String() + ":" + r.Name }

// Rule is one line of an ACL file or one ACL binding stored in etcd: both
// are decided by the same evaluator.
type Rule struct {
	Allow bool
	// Principal is "User:NAME" or "User:*".
	Principal string
	Op        Operation
	Type      ResourceType
	// Pattern is a literal name, "*" alone (every name), or with Prefixed
	// the prefix names must start with.
	Pattern  string
	Prefixed bool
	// Host is the client address the rule applies to; "" or "*" is any.
	Host string
	// Line is where the rule was read, for messages (0: not from a file).
	Line int
}

func (r Rule) String() string {
	verb := "deny"
	if r.Allow {
		verb = "allow"
	}
	pattern := r.Pattern
	if r.Prefixed {
		pattern += "*"
	}
	s := fmt.Sprintf("%s %s %s %s:%s", verb, r.Principal, r.Op, r.Type, pattern)
	if r.Host != "" && r.Host != "*" {
		s += " host=" + r.Host
	}
	return s
}

// matchesHost: an allow for one address matches only a caller known to
// come from it; a deny for one address matches it and also a caller whose
// address is unknown (a call forwarded without one), so a host's deny
// cannot be got round by going through a broker or the gateway.
func (r Rule) matchesHost(host string) bool {
	if r.Host == "" || r.Host == "*" || r.Host == host {
		return true
	}
	return !r.Allow && host == ""
}

// matchesPrincipal: a literal name matches that principal whatever its
// role, so an operator may grant a cluster role something explicitly; the
// wildcard User:* matches only users, so brokers, controllers and the
// gateway never get user powers implicitly.
func (r Rule) matchesPrincipal(p identity.Principal) bool {
	if p.Role == identity.Anonymous {
		return false
	}
	if r.Principal == "User:*" {
		return p.Role == identity.User
	}
	return r.Principal == p.String()
}

// matchesOp: All matches every operation. An allow of Read, Write, Delete
// or Alter also allows Describe, and AlterConfigs allows DescribeConfigs
// (Kafka's implied operations); a deny matches only its own operation or
// All, so denying Read does not hide a topic's existence.
func (r Rule) matchesOp(op Operation) bool {
	if r.Op == All || r.Op == op {
		return true
	}
	if !r.Allow {
		return false
	}
	switch op {
	case Describe:
		return r.Op == Read || r.Op == Write || r.Op == Delete || r.Op == Alter
	case DescribeConfigs:
		return r.Op == AlterConfigs
	}
	return false
}

// matchesResource: there is one cluster, so every Cluster rule names it.
func (r Rule) matchesResource(res Resource) bool {
	if r.Type != res.Type {
		return false
	}
	if r.Type == Cluster || (r.Pattern == "*" && !r.Prefixed) {
		return true
	}
	if r.Prefixed {
		return strings.HasPrefix(res.Name, r.Pattern)
	}
	return r.Pattern == res.Name
}

// ACL is a set of rules: a parsed ACL file, or the bindings in etcd.
type ACL struct {
	Rules []Rule
}

// Allows decides p's op on res by the rules alone (super users are the
// Authorizer's business), for a caller from an unknown address.
func (a *ACL) Allows(p identity.Principal, op Operation, res Resource) bool {
	return allows([]*ACL{a}, p, "", op, res)
}

// AllowsAny reports whether p may do op on some resource of type t.
func (a *ACL) AllowsAny(p identity.Principal, op Operation, t ResourceType) bool {
	return allowsAny([]*ACL{a}, p, "", op, t)
}

// allows decides by the union of the rule sets: any matching deny in any of
// them wins, then any matching allow; nothing matching is a refusal
// (allow.everyone.if.no.acl.found=false).
func allows(sets []*ACL, p identity.Principal, host string, op Operation, res Resource) bool {
	allowed := false
	for _, a := range sets {
		if a == nil {
			continue
		}
		for _, r := range a.Rules {
			if !r.matchesPrincipal(p) || !r.matchesOp(op) || !r.matchesResource(res) || !r.matchesHost(host) {
				continue
			}
			if !r.Allow {
				return false
			}
			allowed = true
		}
	}
	return allowed
}

// allowsAny reports whether p may do op on some resource of type t: an
// allow rule for it exists and no deny of op on every such resource does
// (Kafka's authorizeByResourceType, used for InitProducerId).
func allowsAny(sets []*ACL, p identity.Principal, host string, op Operation, t ResourceType) bool {
	allowed := false
	for _, a := range sets {
		if a == nil {
			continue
		}
		for _, r := range a.Rules {
			if r.Type != t || !r.matchesPrincipal(p) || !r.matchesOp(op) || !r.matchesHost(host) {
				continue
			}
			if !r.Allow && r.Pattern == "*" && !r.Prefixed {
				return false
			}
			if r.Allow {
				allowed = true
			}
		}
	}
	return allowed
}

// Parse reads an ACL file: one rule a line,
//
//	allow|deny PRINCIPAL OPERATION RESOURCE [host=ADDRESS]
//
// e.g. "allow User:alice Write Topic:orders-*" (a trailing '*' makes a
// prefix). '#' starts a comment. The error names the first bad line.
func Parse(r io.Reader) (*ACL, error) {
	acl := &ACL{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		rule, err := parseRule(fields)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rule.Line = n
		acl.Rules = append(acl.Rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return acl, nil
}

func parseRule(f []string) (Rule, error) {
	if len(f) != 4 && len(f) != 5 {
		return Rule{}, fmt.Errorf("want 4 or 5 fields (allow|deny PRINCIPAL OPERATION RESOURCE [host=ADDRESS]), got %d: %q", len(f), strings.Join(f, " "))
	}
	var r Rule
	if len(f) == 5 {
		host, ok := strings.CutPrefix(f[4], "host=")
		if !ok || ValidateHost(host) != nil {
			return Rule{}, fmt.Errorf("%q: want host=* or host=IP", f[4])
		}
		r.Host = host
	}
	switch strings.ToLower(f[0]) {
	case "allow":
		r.Allow = true
	case "deny":
	default:
		return Rule{}, fmt.Errorf("%q: want allow or deny", f[0])
	}
	var err error
	if r.Principal, err = parsePrincipal(f[1]); err != nil {
		return Rule{}, err
	}
	if r.Op, err = ParseOperation(f[2]); err != nil {
		return Rule{}, err
	}
	if r.Type, r.Pattern, err = parseResource(f[3]); err != nil {
		return Rule{}, err
	}
	if prefix, ok := strings.CutSuffix(r.Pattern, "*"); ok && prefix != "" {
		r.Pattern, r.Prefixed = prefix, true
	}
	if !slices.Contains(validOps[r.Type], r.Op) {
		return Rule{}, fmt.Errorf("operation %s does not apply to %s resources (use one of %s)", r.Op, r.Type, opList(validOps[r.Type]))
	}
	return r, nil
}

// parsePrincipal accepts User:NAME and User:*.
func parsePrincipal(s string) (string, error) {
	name, ok := strings.CutPrefix(s, "User:")
	if !ok || name == "" {
		return "", fmt.Errorf("principal %q: want User:NAME or User:*", s)
	}
	if strings.Contains(name, "*") && name != "*" {
		return "", fmt.Errorf("principal %q: '*' stands alone (User:*), principals have no prefixes", s)
	}
	return s, nil
}

// ParseOperation reads an operation name, in any case.
func ParseOperation(s string) (Operation, error) {
	for op, name := range opNames {
		if strings.EqualFold(s, name) {
			return op, nil
		}
	}
	all := make([]Operation, 0, len(opNames))
	for op := range opNames {
		all = append(all, op)
	}
	slices.Sort(all)
	return 0, fmt.Errorf("unknown operation %q (want one of %s)", s, opList(all))
}

func parseResource(s string) (ResourceType, string, error) {
	typ, pattern, _ := strings.Cut(s, ":")
	switch {
	case strings.EqualFold(typ, "Topic"), strings.EqualFold(typ, "Group"):
		rt, name := Topic, "Topic"
		if strings.EqualFold(typ, "Group") {
			rt, name = Group, "Group"
		}
		if pattern == "" {
			return 0, "", fmt.Errorf("resource %q: want %s:NAME, %s:PREFIX* or %s:*", s, name, name, name)
		}
		if i := strings.Index(pattern, "*"); i >= 0 && i != len(pattern)-1 {
			return 0, "", fmt.Errorf("resource %q: '*' may only end a prefix", s)
		}
		return rt, pattern, nil
	case strings.EqualFold(typ, "Cluster"):
		if pattern != "" && pattern != "*" && pattern != ClusterName {
			return 0, "", fmt.Errorf("resource %q: the cluster is Cluster, Cluster:* or Cluster:%s", s, ClusterName)
		}
		return Cluster, "*", nil
	}
	return 0, "", fmt.Errorf("resource %q: want Topic:..., Group:... or Cluster", s)
}

func opList(ops []Operation) string {
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.String()
	}
	return strings.Join(names, ", ")
}
