package metastore

import (
	"context"
	"fmt"
	"log/slog"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"

	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/platform/scram"
)

// UserCredentials are one user's SCRAM credentials by mechanism, as
// `<p>/config/users/<user>` holds them (Kafka's /config/users/<user>
// znode): salt, StoredKey, ServerKey and iterations; never a password.
type UserCredentials map[string]scram.Credential

// maxUserName bounds a user name (Kafka sets none; etcd keys should stay
// small).
const maxUserName = 256

// CheckUserName refuses a user name that cannot be stored: empty, too
// long or not UTF-8.
func CheckUserName(user string) error {
	if user == "" || len(user) > maxUserName || !utf8.ValidString(user) {
		return kerr.New(kerr.UnacceptableCredential, "user name must be 1 to %d bytes of UTF-8", maxUserName)
	}
	return nil
}

// UserCredentials reads one user's credentials (empty if it has none).
func (s *Store) UserCredentials(ctx context.Context, user string) (UserCredentials, error) {
	if err := CheckUserName(user); err != nil {
		return nil, err
	}
	key := s.k.userCredentials(user)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("metastore: read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return UserCredentials{}, nil
	}
	return decode[UserCredentials](key, resp.Kvs[0].Value)
}

// PutUserCredentials replaces a user's credentials, fenced as every
// controller write; empty creds delete the user.
func (s *Session) PutUserCredentials(ctx context.Context, user string, creds UserCredentials) error {
	if err := CheckUserName(user); err != nil {
		return err
	}
	key := s.s.k.userCredentials(user)
	op := clientv3.OpDelete(key)
	if len(creds) > 0 {
		op = clientv3.OpPut(key, encode(creds))
	}
	_, err := s.commit(ctx, nil, []clientv3.Op{op}, nil)
	return err
}

// UsersPrefix is the prefix under which users' credentials are kept; every
// broker follows it (services/scramsync) to log SASL clients in.
func (s *Store) UsersPrefix() string { return s.k.usersDir() }

// UserOf is the user a key under the prefix names.
func (s *Store) UserOf(key string) (string, bool) {
	ki := s.k.parse(key)
	return ki.User, ki.Kind == KindUserCredentials
}

// DecodeUserCredentials decodes one user's stored credentials; a value that
// does not decode, or a key that names no user, is logged and reported not
// ok.
func (s *Store) DecodeUserCredentials(key string, raw []byte) (UserCredentials, bool) {
	if _, ok := s.UserOf(key); !ok {
		s.log.Warn("ignoring a key under the users prefix that names no user", slog.String("key", key))
		return nil, false
	}
	creds, err := decode[UserCredentials](key, raw)
	if err != nil {
		s.log.Warn("ignoring user credentials that do not decode", slog.String("key", key), slog.String("err", err.Error()))
		return nil, false
	}
	return creds, true
}
