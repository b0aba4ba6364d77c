package scram

import (
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// The broker's side of one login: a SCRAM exchange costs two HMACs and a
// hash (the client derives the key), PLAIN a whole key derivation.
func BenchmarkServerLogin(b *testing.B) {
	for _, mech := range []string{SHA256, SHA512, Plain} {
		b.Run(mech, func(b *testing.B) {
			stored := SHA512
			if mech == SHA256 {
				stored = SHA256
			}
			cred, _ := FromPassword(stored, "pw", NewSalt(), MinIterations)
			lookup := func(_, m string) (Credential, bool) { return cred, m == stored }
			var msgs [][]byte
			switch mech {
			case Plain:
				_, m, _ := plain.Auth{User: "u", Pass: "pw"}.AsMechanism().Authenticate(b.Context(), "")
				msgs = [][]byte{m}
			default:
				// A recorded exchange, replayed against a server with the
				// same nonce.
				auth := kscram.Auth{User: "u", Pass: "pw"}
				m := auth.AsSha256Mechanism()
				if mech == SHA512 {
					m = auth.AsSha512Mechanism()
				}
				sess, first, _ := m.Authenticate(b.Context(), "")
				conv, _ := NewConversation(mech, lookup)
				conv.(*scramServer).nonce = func() string { return "fixed" }
				sf, _, _ := conv.Step(first)
				_, final, _ := sess.Challenge(sf)
				msgs = [][]byte{first, final}
			}
			b.ResetTimer()
			for range b.N {
				conv, _ := NewConversation(mech, lookup)
				if s, ok := conv.(*scramServer); ok {
					s.nonce = func() string { return "fixed" }
				}
				for _, m := range msgs {
					if _, _, err := conv.Step(m); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
