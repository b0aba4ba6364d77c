package authz

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strings"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
)

// Binding is one ACL binding in Kafka's model (AclBinding): a resource
// pattern and an access control entry, every field spelled as Kafka's enums
// are (TOPIC, PREFIXED, READ, ALLOW). Bindings are what etcd stores and the
// Kafka and admin APIs carry; Rule turns one into the evaluator's form.
type Binding struct {
	ResourceType   string `json:"resource_type"`
	ResourceName   string `json:"resource_name"`
	PatternType    string `json:"pattern_type"`
	Principal      string `json:"principal"`
	Host           string `json:"host"`
	Operation      string `json:"operation"`
	PermissionType string `json:"permission_type"`
}

// KafkaClusterName is the name Kafka gives the one Cluster resource.
const KafkaClusterName = "kafka-cluster"

// Kafka's enum names, as bindings spell them.
const (
	Any      = "ANY"
	Match    = "MATCH"
	Unknown  = "UNKNOWN"
	Literal  = "LITERAL"
	Prefixed = "PREFIXED"
	AllowPT  = "ALLOW"
	DenyPT   = "DENY"
	Wildcard = "*"
)

var kafkaResourceTypes = map[string]ResourceType{"TOPIC": Topic, "GROUP": Group, "CLUSTER": Cluster}

// kafkaOnlyResourceTypes are Kafka's resource types tidemark has nothing of.
var kafkaOnlyResourceTypes = []string{"TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

var kafkaOps = map[string]Operation{
	"ALL": All, "READ": Read, "WRITE": Write, "CREATE": Create, "DELETE": Delete, "ALTER": Alter,
	"DESCRIBE": Describe, "DESCRIBE_CONFIGS": DescribeConfigs, "ALTER_CONFIGS": AlterConfigs,
	"IDEMPOTENT_WRITE": IdempotentWrite, "INJECT_FAULT": InjectFault,
}

// KafkaName is op as Kafka's AclOperation spells it.
func (o Operation) KafkaName() string {
	for name, op := range kafkaOps {
		if op == o {
			return name
		}
	}
	return Unknown
}

// KafkaName is t as Kafka's ResourceType spells it.
func (t ResourceType) KafkaName() string {
	for name, rt := range kafkaResourceTypes {
		if rt == t {
			return name
		}
	}
	return Unknown
}

func invalid(format string, args ...any) error {
	return kerr.New(kerr.InvalidRequest, format, args...)
}

// maxString is the longest string Kafka's ACL requests carry (an int16
// length): a longer resource name or principal could never be matched by a
// Kafka client's request, and was stored and listed whole.
const maxString = math.MaxInt16

// checkLengths refuses a resource name or principal beyond maxString,
// naming the field.
func checkLengths(resourceName, principal string) error {
	if len(resourceName) > maxString {
		return kerr.BadField(kerr.InvalidRequest, "resource_name", "%d bytes; at most %d", len(resourceName), maxString)
	}
	if len(principal) > maxString {
		return kerr.BadField(kerr.InvalidRequest, "principal", "%d bytes; at most %d", len(principal), maxString)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Validate refuses a binding that cannot be created, with Kafka's messages
// in Kafka's order: the Kafka API's own checks (the cluster's name, an
// empty name), then AclControlManager's, then tidemark's (a principal
// type other than User, a host that is not an IP, an operation that does
// not apply to the resource type).
func (b Binding) Validate() error {
	if err := checkLengths(b.ResourceName, b.Principal); err != nil {
		return err
	}
	if b.ResourceType == "CLUSTER" && b.ResourceName != KafkaClusterName {
		return invalid("The only valid name for the CLUSTER resource is %s", KafkaClusterName)
	}
	if b.ResourceName == "" {
		return invalid("Invalid empty resource name")
	}
	switch b.ResourceType {
	case Any, Unknown, "":
		return invalid("Invalid resourceType %s", orUnknown(b.ResourceType))
	}
	if slices.Contains(kafkaOnlyResourceTypes, b.ResourceType) {
		return invalid("Resource type %s is not supported: tidemark has no such resources (TOPIC, GROUP and CLUSTER are)", b.ResourceType)
	}
	rt, ok := kafkaResourceTypes[b.ResourceType]
	if !ok {
		return invalid("Invalid resourceType %s", b.ResourceType)
	}
	if b.PatternType != Literal && b.PatternType != Prefixed {
		return invalid("Invalid patternType %s", orUnknown(b.PatternType))
	}
	switch b.Operation {
	case Any, Unknown, "":
		return invalid("Invalid operation %s", orUnknown(b.Operation))
	}
	op, ok := kafkaOps[b.Operation]
	if !ok {
		return invalid("Operation %s is not supported by tidemark", b.Operation)
	}
	if b.PermissionType != AllowPT && b.PermissionType != DenyPT {
		return invalid("Invalid permissionType %s", orUnknown(b.PermissionType))
	}
	if b.Principal == "" {
		return invalid("Invalid empty principal specified in ACL binding %s", b)
	}
	typ, name, found := strings.Cut(b.Principal, ":")
	if !found {
		return invalid("expected a string in format principalType:principalName but got %s", b.Principal)
	}
	if typ != "User" || name == "" || (strings.Contains(name, "*") && name != "*") {
		return invalid("Invalid principal %s: tidemark principals are User:NAME or User:*", b.Principal)
	}
	if err := ValidateHost(b.Host); err != nil {
		return invalid("%v", err)
	}
	if !slices.Contains(validOps[rt], op) {
		return invalid("Operation %s does not apply to %s resources", b.Operation, b.ResourceType)
	}
	return nil
}

// ValidateHost accepts "*" or an IP address.
func ValidateHost(h string) error {
	if h == Wildcard || net.ParseIP(h) != nil {
		return nil
	}
	return fmt.Errorf("invalid host %q: want * or an IP address", h)
}

func orUnknown(s string) string {
	if s == "" {
		return Unknown
	}
	return s
}

// Rule is the binding in the evaluator's form; a binding that does not
// validate is an error, never a rule.
func (b Binding) Rule() (Rule, error) {
	if err := b.Validate(); err != nil {
		return Rule{}, err
	}
	return Rule{
		Allow:     b.PermissionType == AllowPT,
		Principal: b.Principal,
		Op:        kafkaOps[b.Operation],
		Type:      kafkaResourceTypes[b.ResourceType],
		Pattern:   b.ResourceName,
		Prefixed:  b.PatternType == Prefixed,
		Host:      b.Host,
	}, nil
}

// String is Kafka's toString of an AclBinding.
func (b Binding) String() string {
	return fmt.Sprintf("(pattern=%s, entry=%s)", b.PatternString(), b.EntryString())
}

// PatternString is Kafka's ResourcePattern toString.
func (b Binding) PatternString() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", b.ResourceType, b.ResourceName, b.PatternType)
}

// EntryString is Kafka's AccessControlEntry toString.
func (b Binding) EntryString() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", b.Principal, b.Host, b.Operation, b.PermissionType)
}

// Filter selects bindings, as Kafka's AclBindingFilter: ANY in an enum
// field and a nil string match everything; the pattern type MATCH matches
// every pattern that would apply to the name.
type Filter struct {
	ResourceType   string
	ResourceName   *string
	PatternType    string
	Principal      *string
	Host           *string
	Operation      string
	PermissionType string
}

// ValidateFilter refuses a filter with an UNKNOWN element, as Kafka does,
// and one with a name none of Kafka's enums has (Kafka's clients cannot
// send one): a misspelt element matched nothing, so a describe answered
// no bindings and a delete deleted none, both as successes.
func (f Filter) Validate() error {
	if err := checkLengths(deref(f.ResourceName), deref(f.Principal)); err != nil {
		return err
	}
	for _, v := range []struct {
		what, field, val string
		known            []string
	}{
		{"resourceType", "resource_type", f.ResourceType, filterResourceTypes},
		{"patternType", "pattern_type", f.PatternType, filterPatternTypes},
		{"operation", "operation", f.Operation, filterOperations},
		{"permissionType", "permission_type", f.PermissionType, filterPermissionTypes},
	} {
		if v.val == Unknown || v.val == "" {
			return invalid("Filter contains UNKNOWN elements: %s is %s", v.what, orUnknown(v.val))
		}
		if !slices.Contains(v.known, v.val) {
			return kerr.BadField(kerr.InvalidRequest, v.field, "%s is not one of %s", v.val, strings.Join(v.known, ", "))
		}
	}
	return nil
}

// The names a filter's elements may have: Kafka's enums' (a filter may
// name a resource type or an operation tidemark has nothing of; it
// matches no binding).
var (
	filterResourceTypes   = []string{Any, "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
	filterPatternTypes    = []string{Any, Match, Literal, Prefixed}
	filterPermissionTypes = []string{Any, DenyPT, AllowPT}
	filterOperations      = []string{Any, "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
		"DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "INJECT_FAULT"}
)

// Matches is Kafka's AclBindingFilter.matches.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) && f.matchesEntry(b)
}

func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != Any && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != Any && f.PatternType != Match && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType == Any || f.PatternType == b.PatternType {
		return name == b.ResourceName
	}
	switch b.PatternType { // MATCH
	case Literal:
		return name == b.ResourceName || b.ResourceName == Wildcard
	case Prefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

func (f Filter) matchesEntry(b Binding) bool {
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == Any || f.Operation == b.Operation) &&
		(f.PermissionType == Any || f.PermissionType == b.PermissionType)
}

// RulesOf turns stored bindings into rules; a binding that does not
// validate is reported to bad and left out, so a broken entry in etcd
// never grants, nor fails the rest.
func RulesOf(bs []Binding, bad func(Binding, error)) *ACL {
	acl := &ACL{Rules: make([]Rule, 0, len(bs))}
	for _, b := range bs {
		r, err := b.Rule()
		if err != nil {
			bad(b, err)
			continue
		}
		acl.Rules = append(acl.Rules, r)
	}
	return acl
}

// BindingFromProto is the admin API's binding.
func BindingFromProto(p *adminv1.AclBinding) Binding {
	return Binding{ResourceType: p.GetResourceType(), ResourceName: p.GetResourceName(), PatternType: p.GetPatternType(),
		Principal: p.GetPrincipal(), Host: p.GetHost(), Operation: p.GetOperation(), PermissionType: p.GetPermissionType()}
}

// Proto is the binding in the admin API's form.
func (b Binding) Proto() *adminv1.AclBinding {
	return &adminv1.AclBinding{ResourceType: b.ResourceType, ResourceName: b.ResourceName, PatternType: b.PatternType,
		Principal: b.Principal, Host: b.Host, Operation: b.Operation, PermissionType: b.PermissionType}
}

// FilterFromProto is the admin API's filter; an empty enum field is ANY.
func FilterFromProto(p *adminv1.AclBindingFilter) Filter {
	if p == nil {
		p = &adminv1.AclBindingFilter{} // absent: every field any
	}
	anyIfEmpty := func(s string) string {
		if s == "" {
			return Any
		}
		return s
	}
	return Filter{ResourceType: anyIfEmpty(p.GetResourceType()), ResourceName: p.ResourceName, PatternType: anyIfEmpty(p.GetPatternType()),
		Principal: p.Principal, Host: p.Host, Operation: anyIfEmpty(p.GetOperation()), PermissionType: anyIfEmpty(p.GetPermissionType())}
}
