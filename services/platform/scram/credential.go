// Package scram is the server side of Kafka's password mechanisms:
// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and PLAIN
// (RFC 4616), all checked against one stored SCRAM credential. A credential
// is what Kafka keeps in ZooKeeper for a user and mechanism: the salt, the
// iteration count, StoredKey and ServerKey; never the password, nor the
// salted password (which would let its holder log in).
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"slices"
)

// Mechanism names, as Kafka spells them.
const (
	SHA256 = "SCRAM-SHA-256"
	SHA512 = "SCRAM-SHA-512"
	Plain  = "PLAIN"
)

// Kafka's bounds on a credential's iteration count (ScramMechanism's
// minIterations, and the 16384 AlterUserScramCredentials accepts at most).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// Mechanisms are the SCRAM mechanisms a credential can be stored for.
var Mechanisms = []string{SHA256, SHA512}

// Known reports whether mech is a SCRAM mechanism.
func Known(mech string) bool { return slices.Contains(Mechanisms, mech) }

// Credential is what is stored for one user and SCRAM mechanism.
type Credential struct {
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int    `json:"iterations"`
}

func hashFor(mech string) (func() hash.Hash, error) {
	switch mech {
	case SHA256:
		return sha256.New, nil
	case SHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("unknown SCRAM mechanism %q: want %s or %s", mech, SHA256, SHA512)
}

// CheckIterations is Kafka's rule for a stored credential.
func CheckIterations(mech string, n int) error {
	if n < MinIterations || n > MaxIterations {
		return fmt.Errorf("iterations %d for %s are outside [%d, %d]", n, mech, MinIterations, MaxIterations)
	}
	return nil
}

// SaltPassword is Hi(password, salt, iterations), the salted password a
// client sends in AlterUserScramCredentials.
func SaltPassword(mech, password string, salt []byte, iterations int) ([]byte, error) {
	h, err := hashFor(mech)
	if err != nil {
		return nil, err
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// NewSalt is a random 16-byte salt.
func NewSalt() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}

// FromSaltedPassword derives the stored credential; the salted password
// itself is not kept.
func FromSaltedPassword(mech string, salt, salted []byte, iterations int) (Credential, error) {
	h, err := hashFor(mech)
	if err != nil {
		return Credential{}, err
	}
	if err := CheckIterations(mech, iterations); err != nil {
		return Credential{}, err
	}
	if len(salt) == 0 || len(salted) == 0 {
		return Credential{}, fmt.Errorf("empty salt or salted password")
	}
	clientKey := mac(h, salted, []byte("Client Key"))
	return Credential{
		Salt:       slices.Clone(salt),
		StoredKey:  sum(h, clientKey),
		ServerKey:  mac(h, salted, []byte("Server Key")),
		Iterations: iterations,
	}, nil
}

// FromPassword is FromSaltedPassword of a password, for the CLI and tests.
func FromPassword(mech, password string, salt []byte, iterations int) (Credential, error) {
	if err := CheckIterations(mech, iterations); err != nil {
		return Credential{}, err
	}
	salted, err := SaltPassword(mech, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return FromSaltedPassword(mech, salt, salted, iterations)
}

// VerifyPassword checks a password (PLAIN) against a stored credential by
// deriving its StoredKey, compared in constant time.
func VerifyPassword(mech string, c Credential, password string) bool {
	h, err := hashFor(mech)
	if err != nil || CheckIterations(mech, c.Iterations) != nil {
		return false
	}
	salted, err := pbkdf2.Key(h, password, c.Salt, c.Iterations, h().Size())
	if err != nil {
		return false
	}
	return hmac.Equal(sum(h, mac(h, salted, []byte("Client Key"))), c.StoredKey)
}

func mac(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

func sum(h func() hash.Hash, b []byte) []byte {
	d := h()
	d.Write(b)
	return d.Sum(nil)
}
