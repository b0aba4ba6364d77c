package scram

import (
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// RFC 7677 section 3's exchange, with the server nonce it shows.
func TestRFC7677TestVector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := FromPassword(SHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	conv, _ := NewConversation(SHA256, func(user, mech string) (Credential, bool) {
		return cred, user == "user" && mech == SHA256
	})
	conv.(*scramServer).nonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	resp, done, err := conv.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatal(done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(resp) != want {
		t.Fatalf("server-first-message %q, want %q", resp, want)
	}
	resp, done, err = conv.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatal(done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(resp) != want {
		t.Fatalf("server-final-message %q, want %q", resp, want)
	}
	if conv.User() != "user" {
		t.Fatalf("user %q", conv.User())
	}
}

type store map[[2]string]Credential

func (s store) lookup(user, mech string) (Credential, bool) {
	c, ok := s[[2]string{user, mech}]
	return c, ok
}

func newStore(t *testing.T, user, password string) store {
	s := store{}
	for _, mech := range Mechanisms {
		c, err := FromPassword(mech, password, NewSalt(), 4096+len(mech))
		if err != nil {
			t.Fatal(err)
		}
		s[[2]string{user, mech}] = c
	}
	return s
}

// exchange runs franz-go's client mechanism against a server conversation.
func exchange(t *testing.T, m sasl.Mechanism, conv Conversation) error {
	t.Helper()
	sess, msg, err := m.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		resp, done, err := conv.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, err := sess.Challenge(resp)
		if err != nil {
			t.Fatalf("client refused the server's answer: %v", err)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return nil
}

func TestClientExchanges(t *testing.T) {
	s := newStore(t, "alice,=x", "s3cret")
	for _, tc := range []struct {
		name string
		mech string
		m    sasl.Mechanism
		err  error
	}{
		{"sha256", SHA256, kscram.Auth{User: "alice,=x", Pass: "s3cret"}.AsSha256Mechanism(), nil},
		{"sha512", SHA512, kscram.Auth{User: "alice,=x", Pass: "s3cret"}.AsSha512Mechanism(), nil},
		{"sha512 with authzid", SHA512, kscram.Auth{User: "alice,=x", Pass: "s3cret", Zid: "alice,=x"}.AsSha512Mechanism(), nil},
		{"wrong password", SHA256, kscram.Auth{User: "alice,=x", Pass: "nope"}.AsSha256Mechanism(), ErrInvalidCredentials},
		{"unknown user", SHA512, kscram.Auth{User: "bob", Pass: "s3cret"}.AsSha512Mechanism(), ErrInvalidCredentials},
		{"plain", Plain, plain.Auth{User: "alice,=x", Pass: "s3cret"}.AsMechanism(), nil},
		{"plain wrong password", Plain, plain.Auth{User: "alice,=x", Pass: "s3cre"}.AsMechanism(), ErrInvalidCredentials},
		{"plain unknown user", Plain, plain.Auth{User: "bob", Pass: "s3cret"}.AsMechanism(), ErrInvalidCredentials},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv, err := NewConversation(tc.mech, s.lookup)
			if err != nil {
				t.Fatal(err)
			}
			err = exchange(t, tc.m, conv)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
		})
	}
}

func TestRefusedClientMessages(t *testing.T) {
	s := newStore(t, "alice", "pw")
	for _, tc := range []struct{ name, msg string }{
		{"token auth", "n,,n=alice,r=abc,tokenauth=true"},
		{"channel binding", "p=tls-unique,,n=alice,r=abc"},
		{"other authzid", "n,a=bob,n=alice,r=abc"},
		{"no nonce", "n,,n=alice"},
		{"mandatory extension", "n,,m=x,n=alice,r=abc"},
		{"bad escape", "n,,n=al=ice,r=abc"},
		{"empty user", "n,,n=,r=abc"},
		{"garbage", "\x00\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv, _ := NewConversation(SHA256, s.lookup)
			if _, _, err := conv.Step([]byte(tc.msg)); err == nil {
				t.Fatalf("%q accepted", tc.msg)
			}
		})
	}
	t.Run("wrong nonce in final", func(t *testing.T) {
		conv, _ := NewConversation(SHA256, s.lookup)
		if _, _, err := conv.Step([]byte("n,,n=alice,r=abc")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := conv.Step([]byte("c=biws,r=abcXYZ,p=AAAA")); err == nil {
			t.Fatal("a final message with another nonce was accepted")
		}
	})
	t.Run("unknown user answers like a known one", func(t *testing.T) {
		conv, _ := NewConversation(SHA256, s.lookup)
		resp, _, err := conv.Step([]byte("n,,n=mallory,r=abc"))
		if err != nil || len(resp) == 0 {
			t.Fatalf("%q %v", resp, err)
		}
	})
}

func TestCredentialRules(t *testing.T) {
	if _, err := FromPassword(SHA256, "pw", NewSalt(), 4095); err == nil {
		t.Fatal("4095 iterations accepted")
	}
	if _, err := FromPassword(SHA512, "pw", NewSalt(), 16385); err == nil {
		t.Fatal("16385 iterations accepted")
	}
	if _, err := FromPassword("SCRAM-SHA-1", "pw", NewSalt(), 4096); err == nil {
		t.Fatal("SCRAM-SHA-1 accepted")
	}
	c, _ := FromPassword(SHA512, "pw", NewSalt(), 4096)
	if !VerifyPassword(SHA512, c, "pw") || VerifyPassword(SHA512, c, "pW") || VerifyPassword(SHA256, c, "pw") {
		t.Fatal("VerifyPassword")
	}
}

// librdkafka sends its own nonce again in front of the server's in its
// final message; Kafka takes a nonce that ends with the one it sent.
func TestNonceWithTheClientNoncePrefixedAgain(t *testing.T) {
	salt := NewSalt()
	cred, _ := FromPassword(SHA512, "pw", salt, MinIterations)
	conv, _ := NewConversation(SHA512, func(string, string) (Credential, bool) { return cred, true })
	clientFirstBare := "n=u,r=cnonce"
	serverFirst, _, err := conv.Step([]byte("n,," + clientFirstBare))
	if err != nil {
		t.Fatal(err)
	}
	full := strings.TrimPrefix(strings.Split(string(serverFirst), ",")[0], "r=")
	for _, tc := range []struct {
		nonce string
		ok    bool
	}{{"cnonce" + full, true}, {full + "x", false}} {
		conv, _ := NewConversation(SHA512, func(string, string) (Credential, bool) { return cred, true })
		conv.(*scramServer).nonce = func() string { return strings.TrimPrefix(full, "cnonce") }
		if _, _, err := conv.Step([]byte("n,," + clientFirstBare)); err != nil {
			t.Fatal(err)
		}
		withoutProof := "c=biws,r=" + tc.nonce
		salted, _ := SaltPassword(SHA512, "pw", salt, MinIterations)
		clientKey := mac(sha512.New, salted, []byte("Client Key"))
		sig := mac(sha512.New, sum(sha512.New, clientKey), []byte(clientFirstBare+","+string(serverFirst)+","+withoutProof))
		for i := range sig {
			sig[i] ^= clientKey[i]
		}
		_, done, err := conv.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig)))
		if (err == nil && done) != tc.ok {
			t.Fatalf("nonce %q: done %v err %v, want ok=%v", tc.nonce, done, err, tc.ok)
		}
	}
}
