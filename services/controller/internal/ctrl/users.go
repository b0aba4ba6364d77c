package ctrl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	controlv1 "tidemark.io/proto/gen/tidemark/control/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/scram"
)

// Users' SCRAM credentials (the SASL listeners' logins) live in etcd under
// <p>/config/users/<user>, as Kafka's ZooKeeper mode keeps them under
// /config/users. The controller writes them (fenced) and holds them in the
// core to describe and alter them; every broker follows the prefix itself
// (services/scramsync) and logs clients in against what it holds, so a
// change counts at the next login on every broker, without a restart and
// without an UpdateMetadata.

// evUsersChanged is a user's credentials written (by this controller or
// behind it); empty creds: the user is gone.
type evUsersChanged struct {
	user  string
	creds metastore.UserCredentials
}

func (evUsersChanged) coreEvent() {}

// usersChanged keeps a user's new credentials.
func (c *core) usersChanged(user string, creds metastore.UserCredentials) {
	if len(creds) == 0 {
		delete(c.users, user)
	} else {
		c.users[user] = creds
	}
	mechs := slices.Sorted(maps.Keys(creds))
	c.log.Info("User credentials changed", "user", user, "mechanisms", mechs)
	c.emitEvent(controlv1.EventKind_EVENT_KIND_CONFIG_CHANGED, func(ev *controlv1.ClusterEvent) {
		ev.NodeId = -1
		ev.Reason = fmt.Sprintf("user %s SCRAM credentials now %v", user, mechs)
	})
}

// DescribeUserScramCredentials lists users' mechanisms and iterations, as
// Kafka's DescribeUserScramCredentials: all users, or the ones named
// (RESOURCE_NOT_FOUND for one without credentials, DUPLICATE_RESOURCE
// for one named twice).
func (a *Active) DescribeUserScramCredentials(ctx context.Context, req *adminv1.DescribeUserScramCredentialsRequest) (*adminv1.DescribeUserScramCredentialsResponse, error) {
	resp := &adminv1.DescribeUserScramCredentialsResponse{}
	err := a.call(ctx, func() error {
		users := req.GetUsers()
		if len(users) == 0 {
			users = slices.Sorted(maps.Keys(a.users))
		}
		named := map[string]int{}
		for _, u := range users {
			named[u]++
		}
		for _, u := range users {
			r := &adminv1.UserScramCredentials{User: u}
			switch creds, ok := a.users[u]; {
			case named[u] > 1:
				r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(kerr.DuplicateResource), "Cannot describe SCRAM credentials for the same user twice in a single request: "+u
			case !ok:
				r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(kerr.ResourceNotFound), "Attempt to describe a user credential that does not exist: "+u
			default:
				for _, mech := range slices.Sorted(maps.Keys(creds)) {
					r.Credentials = append(r.Credentials, &adminv1.ScramCredentialInfo{Mechanism: mech, Iterations: int32(creds[mech].Iterations)})
				}
			}
			resp.Results = append(resp.Results, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// AlterUserScramCredentials sets and deletes credentials, one result per
// user named, with Kafka's per-user errors; a user with any refused
// change gets none of its changes. Each user's new set is one fenced
// write; brokers get it in the UpdateMetadata that follows.
func (a *Active) AlterUserScramCredentials(ctx context.Context, req *adminv1.AlterUserScramCredentialsRequest) (*adminv1.AlterUserScramCredentialsResponse, error) {
	resp := &adminv1.AlterUserScramCredentialsResponse{}
	err := a.call(ctx, func() error {
		plan := planUserChanges(req, a.users)
		for _, p := range plan {
			r := &adminv1.AlterUserScramCredentialsResult{User: p.user}
			resp.Results = append(resp.Results, r)
			if p.err != nil {
				ke := kerr.As(p.err)
				r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
				continue
			}
			wctx, cancel := a.writeCtx()
			err := a.sess.PutUserCredentials(wctx, p.user, p.next)
			cancel()
			if errors.Is(err, metastore.ErrControllerMoved) {
				a.stepDown(err)
				return a.notControllerFor(err)
			}
			if err != nil {
				ke := kerr.As(err)
				r.ErrorCode, r.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
				continue
			}
			a.step(evUsersChanged{user: p.user, creds: p.next})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// userChange is one user's part of an AlterUserScramCredentials: its new
// credentials, or why none of its changes are made.
type userChange struct {
	user string
	next metastore.UserCredentials
	err  error
}

// planUserChanges validates a request against the stored credentials, as
// Kafka's controller does: in the order users are first named.
func planUserChanges(req *adminv1.AlterUserScramCredentialsRequest, cur map[string]metastore.UserCredentials) []*userChange {
	var order []*userChange
	byUser := map[string]*userChange{}
	seen := map[[2]string]bool{}
	change := func(user, mech string) *userChange {
		uc := byUser[user]
		if uc == nil {
			uc = &userChange{user: user, next: maps.Clone(cur[user])}
			if uc.next == nil {
				uc.next = metastore.UserCredentials{}
			}
			byUser[user] = uc
			order = append(order, uc)
		}
		if uc.err != nil {
			return nil
		}
		switch {
		case user == "":
			uc.err = kerr.New(kerr.UnacceptableCredential, "Username must not be empty")
		case metastore.CheckUserName(user) != nil:
			uc.err = metastore.CheckUserName(user)
		case identity.Parse(user).Role != identity.User:
			uc.err = kerr.New(kerr.UnacceptableCredential, "user name %q is a cluster role's certificate name (broker-N, controller-N, gateway): choose another", user)
		case !scram.Known(mech):
			uc.err = kerr.New(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism %q: want %s or %s", mech, scram.SHA256, scram.SHA512)
		case seen[[2]string{user, mech}]:
			uc.err = kerr.New(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		}
		seen[[2]string{user, mech}] = true
		if uc.err != nil {
			return nil
		}
		return uc
	}
	for _, d := range req.GetDeletions() {
		uc := change(d.GetUser(), d.GetMechanism())
		if uc == nil {
			continue
		}
		if _, ok := uc.next[d.GetMechanism()]; !ok {
			uc.err = kerr.New(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			continue
		}
		delete(uc.next, d.GetMechanism())
	}
	for _, u := range req.GetUpsertions() {
		uc := change(u.GetUser(), u.GetMechanism())
		if uc == nil {
			continue
		}
		switch n := int(u.GetIterations()); {
		case n < scram.MinIterations:
			uc.err = kerr.New(kerr.UnacceptableCredential, "Too few iterations: %d, at least %d", n, scram.MinIterations)
			continue
		case n > scram.MaxIterations:
			uc.err = kerr.New(kerr.UnacceptableCredential, "Too many iterations: %d, at most %d", n, scram.MaxIterations)
			continue
		}
		cred, err := scram.FromSaltedPassword(u.GetMechanism(), u.GetSalt(), u.GetSaltedPassword(), int(u.GetIterations()))
		if err != nil {
			uc.err = kerr.New(kerr.UnacceptableCredential, "%v", err)
			continue
		}
		uc.next[u.GetMechanism()] = cred
	}
	return order
}

// applyUsers makes a user's credentials, changed behind the controller,
// effective (a core event).
func (a *Active) applyUsers(user string, creds metastore.UserCredentials) {
	a.step(evUsersChanged{user: user, creds: creds})
}
