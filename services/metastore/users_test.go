package metastore

import (
	"reflect"
	"testing"
	"time"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/scram"
)

// Users' credentials round-trip through etcd under a path-escaped name,
// appear in a load and in the config watch, and go when emptied.
func TestUserCredentialsStoredLoadedAndWatched(t *testing.T) {
	ctx := testCtx(t)
	_, s := startStore(t)
	sess := elect(t, ctx, s, 1, 2*time.Second)
	cred, err := scram.FromPassword(scram.SHA256, "pw", scram.NewSalt(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	user := "ops/alice=x" // a '/' must not make a deeper key
	want := UserCredentials{scram.SHA256: cred}
	cl, err := s.LoadCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch := s.WatchConfigs(ctx, cl.Revision+1)
	if err := sess.PutUserCredentials(ctx, user, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.UserCredentials(ctx, user)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v %v", got, err)
	}
	cl, err = s.LoadCluster(ctx)
	if err != nil || !reflect.DeepEqual(cl.Users[user], want) {
		t.Fatalf("load: %+v %v", cl.Users, err)
	}
	wr := <-watch
	if len(wr.Events) != 1 || wr.Events[0].Kind != KindUserCredentials || wr.Events[0].User != user || !reflect.DeepEqual(wr.Events[0].Credentials, want) {
		t.Fatalf("watch: %+v", wr.Events)
	}
	if err := sess.PutUserCredentials(ctx, user, nil); err != nil {
		t.Fatal(err)
	}
	if cl, _ = s.LoadCluster(ctx); len(cl.Users) != 0 {
		t.Fatalf("deleted user still loaded: %+v", cl.Users)
	}
	for _, bad := range []string{"", string(make([]byte, 300))} {
		if err := sess.PutUserCredentials(ctx, bad, want); kerr.As(err).Code != kerr.UnacceptableCredential {
			t.Errorf("user %q: %v", bad, err)
		}
	}
}
