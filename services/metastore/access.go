package metastore

import (
	"strconv"
	"strings"
)

// The etcd roles tidemark's processes run under when etcd has auth on
// (see DESIGN.md, "etcd access"). Each holds the least the process needs.
const (
	// BrokerRole is every broker's shared read access.
	BrokerRole = "tidemark-broker"
	// ControllerRole owns the metadata.
	ControllerRole = "tidemark-controller"
	// AdminRole reads the metadata (`tidemark metadata dump`).
	AdminRole = "tidemark-admin"
)

// BrokerOwnRole is broker id's own role: write access to its registration
// key and nothing else, so one broker's certificate cannot touch another's.
func BrokerOwnRole(id int32) string { return BrokerRole + "-" + BrokerEntity(id) }

// Permission is a key, or every key under a prefix, a role may read or
// read and write.
type Permission struct {
	Key    string
	Prefix bool
	Write  bool
	// Why the role needs it, for readers of the role table (DESIGN.md).
	Why string
}

// Role is an etcd role and its permissions.
type Role struct {
	Name        string
	Permissions []Permission
}

// Roles are the shared roles for tidemark's keys under prefix.
func Roles(prefix string) []Role {
	k := keys{p: normPrefix(prefix)}
	return []Role{
		{Name: BrokerRole, Permissions: []Permission{
			{Key: k.controller(), Why: "find the active controller to open its session with"},
			{Key: k.controllerEpoch(), Why: "read with the controller key in one transaction, and in its registration's (older controllers are refused from its first moment)"},
			{Key: k.clusterID(), Why: "check that its data dir belongs to this cluster (meta.properties)"},
			{Key: k.aclsDir(), Prefix: true, Why: "read and watch the ACL bindings its authorizer decides by"},
			{Key: k.quotasDir(), Prefix: true, Why: "read and watch the client quota entities it throttles by"},
			{Key: k.usersDir(), Prefix: true, Why: "read and watch the users' SCRAM credentials its SASL listeners log clients in against"},
		}},
		{Name: ControllerRole, Permissions: []Permission{
			{Key: k.all(), Prefix: true, Write: true, Why: "elect itself (controller, controller_epoch), register (controllers/<id>), " +
				"write assignments, partition states, configs, users' SCRAM credentials, ACL bindings, client quotas, deletions, producer id blocks and the cluster id, " +
				"watch the brokers' registrations, and delete a dead broker's registration and revoke its lease"},
		}},
		{Name: AdminRole, Permissions: []Permission{
			{Key: k.all(), Prefix: true, Why: "read every key for `tidemark metadata dump`"},
		}},
	}
}

// BrokerOwn is broker id's own role under prefix.
func BrokerOwn(prefix string, id int32) Role {
	k := keys{p: normPrefix(prefix)}
	return Role{Name: BrokerOwnRole(id), Permissions: []Permission{
		{Key: k.broker(id), Write: true, Why: "register broker " + strconv.Itoa(int(id)) +
			" (a lease-bound key whose create revision is its broker epoch), watch it, and revoke its lease at shutdown"},
	}}
}

// normPrefix is the prefix as New uses it.
func normPrefix(p string) string {
	if p == "" {
		return DefaultPrefix
	}
	return strings.TrimRight(p, "/")
}
