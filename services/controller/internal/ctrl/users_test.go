package ctrl

import (
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/scram"
)

// AlterUserScramCredentials is planned per user, in the order users are
// first named, with Kafka's errors; a user with any refused change keeps
// its credentials whole.
func TestPlanUserChanges(t *testing.T) {
	salted := make([]byte, 32)
	up := func(user, mech string, iter int32) *adminv1.ScramCredentialUpsertion {
		return &adminv1.ScramCredentialUpsertion{User: user, Mechanism: mech, Iterations: iter, Salt: []byte("salt"), SaltedPassword: salted}
	}
	old, _ := scram.FromSaltedPassword(scram.SHA256, []byte("old"), salted, 4096)
	cur := map[string]metastore.UserCredentials{"alice": {scram.SHA256: old}}
	plan := planUserChanges(&adminv1.AlterUserScramCredentialsRequest{
		Deletions: []*adminv1.ScramCredentialDeletion{{User: "alice", Mechanism: scram.SHA256}, {User: "carol", Mechanism: scram.SHA512}},
		Upsertions: []*adminv1.ScramCredentialUpsertion{
			up("alice", scram.SHA512, 4096),
			up("bob", scram.SHA256, 4096), up("bob", scram.SHA512, 100), // one bad change spoils bob's
			up("dave", scram.SHA256, 4096), up("dave", scram.SHA256, 8192),
			up("erin", "SCRAM-SHA-1", 4096),
			up("gateway", scram.SHA256, 4096),
			{User: "frank", Mechanism: scram.SHA256, Iterations: 4096},
		},
	}, cur)
	want := []struct {
		user  string
		code  kerr.Code
		mechs int
	}{
		{"alice", 0, 1}, {"carol", kerr.ResourceNotFound, 0}, {"bob", kerr.UnacceptableCredential, 0},
		{"dave", kerr.DuplicateResource, 0}, {"erin", kerr.UnsupportedSaslMechanism, 0},
		{"gateway", kerr.UnacceptableCredential, 0}, {"frank", kerr.UnacceptableCredential, 0},
	}
	if len(plan) != len(want) {
		t.Fatalf("%d results, want %d", len(plan), len(want))
	}
	for i, w := range want {
		p := plan[i]
		code := kerr.Code(0)
		if p.err != nil {
			code = kerr.As(p.err).Code
		}
		if p.user != w.user || code != w.code || (code == 0 && len(p.next) != w.mechs) {
			t.Errorf("result %d: %s %v %d mechanisms, want %s %v %d", i, p.user, p.err, len(p.next), w.user, w.code, w.mechs)
		}
	}
	if _, ok := plan[0].next[scram.SHA512]; !ok {
		t.Error("alice: SCRAM-SHA-512 not set")
	}
	if len(cur["alice"]) != 1 || cur["alice"][scram.SHA256].Iterations != 4096 {
		t.Error("the plan changed the stored credentials")
	}
}
