// Package etcdauth turns on etcd's authentication for a tidemark cluster:
// it creates the roles of metastore.Roles, a user per broker, controller
// and administrator with the roles it needs, and the root user, then
// enables auth. Users have no password by default: etcd running with
// --client-cert-auth takes the Common Name of the client certificate as
// the user (broker-1, controller-1, admin, root), which is how the dev
// cluster runs.
//
// Setup is idempotent: run it on every start (as root once auth is on) and
// it adds what is missing, such as the user of a broker added since.
package etcdauth

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/metastore"
)

// Plan is who gets an etcd user.
type Plan struct {
	// Prefix is the root of tidemark's keys.
	Prefix string
	// Brokers and Controllers are ids: users broker-<id> and
	// controller-<id>.
	Brokers, Controllers []int32
	// Admins are user names with read access to every key (the CLI).
	Admins []string
	// Passwords, by user name (root included), for password
	// authentication; users not in it have none and authenticate by
	// certificate only. An existing user's password is set again.
	Passwords map[string]string
}

// User names of the plan's processes.
func BrokerUser(id int32) string     { return fmt.Sprintf("broker-%d", id) }
func ControllerUser(id int32) string { return fmt.Sprintf("controller-%d", id) }

// RootUser is etcd's superuser; Setup creates it (etcd refuses to enable
// auth without it).
const RootUser = "root"

// Setup creates p's roles and users and enables auth. cli must be root once
// auth is on (and may be anyone before).
func Setup(ctx context.Context, cli *clientv3.Client, p Plan) error {
	roles := metastore.Roles(p.Prefix)
	for _, id := range p.Brokers {
		roles = append(roles, metastore.BrokerOwn(p.Prefix, id))
	}
	for _, r := range roles {
		if err := ensureRole(ctx, cli, r); err != nil {
			return err
		}
	}
	users := map[string][]string{RootUser: {"root"}}
	for _, id := range p.Brokers {
		users[BrokerUser(id)] = []string{metastore.BrokerRole, metastore.BrokerOwnRole(id)}
	}
	for _, id := range p.Controllers {
		users[ControllerUser(id)] = []string{metastore.ControllerRole}
	}
	for _, name := range p.Admins {
		users[name] = append(users[name], metastore.AdminRole)
	}
	if _, err := cli.RoleAdd(ctx, "root"); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("etcd: add role root: %w", err)
	}
	for name, rs := range users {
		if err := ensureUser(ctx, cli, name, p.Passwords[name], rs); err != nil {
			return err
		}
	}
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("etcd: auth status: %w", err)
	}
	if !st.Enabled {
		if _, err := cli.AuthEnable(ctx); err != nil {
			return fmt.Errorf("etcd: enable auth: %w", err)
		}
	}
	return nil
}

func ensureRole(ctx context.Context, cli *clientv3.Client, r metastore.Role) error {
	if _, err := cli.RoleAdd(ctx, r.Name); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("etcd: add role %s: %w", r.Name, err)
	}
	for _, perm := range r.Permissions {
		end := ""
		if perm.Prefix {
			end = clientv3.GetPrefixRangeEnd(perm.Key)
		}
		typ := clientv3.PermissionType(clientv3.PermRead)
		if perm.Write {
			typ = clientv3.PermissionType(clientv3.PermReadWrite)
		}
		if _, err := cli.RoleGrantPermission(ctx, r.Name, perm.Key, end, typ); err != nil {
			return fmt.Errorf("etcd: grant %s on %s: %w", r.Name, perm.Key, err)
		}
	}
	return nil
}

func ensureUser(ctx context.Context, cli *clientv3.Client, name, password string, roles []string) error {
	_, err := cli.UserAddWithOptions(ctx, name, password, &clientv3.UserAddOptions{NoPassword: password == ""})
	switch {
	case errors.Is(err, rpctypes.ErrUserAlreadyExist):
		if password != "" {
			if _, err := cli.UserChangePassword(ctx, name, password); err != nil {
				return fmt.Errorf("etcd: set password of %s: %w", name, err)
			}
		}
	case err != nil:
		return fmt.Errorf("etcd: add user %s: %w", name, err)
	}
	for _, r := range roles {
		if _, err := cli.UserGrantRole(ctx, name, r); err != nil {
			return fmt.Errorf("etcd: grant role %s to %s: %w", r, name, err)
		}
	}
	return nil
}
