package scram

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Lookup finds the stored credential of user for a SCRAM mechanism.
type Lookup func(user, mech string) (Credential, bool)

// Conversation is one server-side authentication exchange: each client
// message in, the server's answer out, until done or an error. An error
// is final: the caller answers SASL_AUTHENTICATION_FAILED (never with the
// error's text, which is for the broker's log) and closes the connection.
type Conversation interface {
	Step(msg []byte) (resp []byte, done bool, err error)
	// User is the user the client named, once its first message is read
	// ("" before): for logs and, once done, the principal.
	User() string
}

// NewConversation starts an exchange of mech: SHA256, SHA512 or Plain.
func NewConversation(mech string, lookup Lookup) (Conversation, error) {
	if mech == Plain {
		return &plainServer{lookup: lookup}, nil
	}
	h, err := hashFor(mech)
	if err != nil {
		return nil, err
	}
	return &scramServer{mech: mech, h: h, lookup: lookup, nonce: randomNonce}, nil
}

// ErrInvalidCredentials is an unknown user or a wrong password or proof.
var ErrInvalidCredentials = errors.New("invalid credentials")

// scramServer is RFC 5802's server, as Kafka's ScramSaslServer runs it:
// no channel binding, the client's authorization id only when it is its
// user name, and the tokenauth extension (delegation tokens, which
// tidemark does not have) refused.
type scramServer struct {
	mech   string
	h      func() hash.Hash
	lookup Lookup
	nonce  func() string

	step                                  int
	user                                  string
	cred                                  Credential
	known                                 bool
	gs2Header, clientFirstBare, fullNonce string
	serverFirst                           string
}

func (s *scramServer) User() string { return s.user }

func (s *scramServer) Step(msg []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		resp, err := s.first(string(msg))
		return resp, false, err
	case 2:
		resp, err := s.final(string(msg))
		return resp, err == nil, err
	}
	return nil, false, errors.New("SCRAM exchange already complete")
}

func (s *scramServer) first(msg string) ([]byte, error) {
	// gs2-header: channel-binding flag, optional authzid.
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, errors.New("malformed client-first-message")
	}
	switch {
	case flag == "n" || flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, errors.New("channel binding is not supported")
	default:
		return nil, fmt.Errorf("malformed gs2 header flag %q", flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, errors.New("malformed client-first-message")
	}
	if authz != "" && !strings.HasPrefix(authz, "a=") {
		return nil, errors.New("malformed authorization id")
	}
	s.gs2Header = flag + "," + authz + ","
	s.clientFirstBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, errors.New("client-first-message needs n= and r= (mandatory extensions are not supported)")
	}
	user, err := decodeName(attrs[0][2:])
	if err != nil {
		return nil, err
	}
	s.user = user
	if user == "" {
		return nil, errors.New("empty user name")
	}
	if authz != "" {
		az, err := decodeName(authz[2:])
		if err != nil || az != user {
			return nil, errors.New("authorization id differs from the user name")
		}
	}
	clientNonce := attrs[1][2:]
	if clientNonce == "" {
		return nil, errors.New("empty client nonce")
	}
	for _, ext := range attrs[2:] {
		k, _, ok := strings.Cut(ext, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("malformed extension %q", ext)
		}
		if k == "tokenauth" {
			return nil, errors.New("delegation tokens (the tokenauth extension) are not supported")
		}
	}
	s.cred, s.known = s.lookup(user, s.mech)
	if !s.known {
		// An unknown user gets a salt and count of the same shape as a
		// real one and fails only at the proof, so the exchange does not
		// tell which users exist.
		s.cred = decoy(s.h, user)
	}
	s.fullNonce = clientNonce + s.nonce()
	s.serverFirst = "r=" + s.fullNonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *scramServer) final(msg string) ([]byte, error) {
	withoutProof, proofAttr, ok := cutLast(msg, ",")
	if !ok || !strings.HasPrefix(proofAttr, "p=") {
		return nil, errors.New("client-final-message ends without p=")
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, errors.New("client-final-message needs c= and r=")
	}
	binding, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(binding) != s.gs2Header {
		return nil, errors.New("channel binding does not match the gs2 header")
	}
	// Kafka's server takes a nonce that ends with the one it sent, and
	// librdkafka sends its own nonce again in front of it.
	if !strings.HasSuffix(attrs[1][2:], s.fullNonce) {
		return nil, errors.New("nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr[2:])
	if err != nil {
		return nil, errors.New("malformed proof")
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	clientSig := mac(s.h, s.cred.StoredKey, authMessage)
	if len(proof) != len(clientSig) {
		return nil, ErrInvalidCredentials
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	if !hmac.Equal(sum(s.h, clientKey), s.cred.StoredKey) || !s.known {
		return nil, ErrInvalidCredentials
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac(s.h, s.cred.ServerKey, authMessage))), nil
}

// plainServer is RFC 4616's PLAIN: the password itself, checked against
// the user's stored SCRAM credential (SHA-512's when both are stored).
type plainServer struct {
	lookup Lookup
	user   string
	done   bool
}

func (p *plainServer) User() string { return p.user }

func (p *plainServer) Step(msg []byte) ([]byte, bool, error) {
	if p.done {
		return nil, false, errors.New("PLAIN exchange already complete")
	}
	p.done = true
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, errors.New("malformed PLAIN message: want authzid NUL user NUL password")
	}
	authz, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	p.user = user
	if user == "" || password == "" {
		return nil, false, errors.New("empty user name or password")
	}
	if authz != "" && authz != user {
		return nil, false, errors.New("authorization id differs from the user name")
	}
	for _, mech := range []string{SHA512, SHA256} {
		if c, ok := p.lookup(user, mech); ok {
			if !VerifyPassword(mech, c, password) {
				return nil, false, ErrInvalidCredentials
			}
			return nil, true, nil
		}
	}
	// The same work for an unknown user as for a known one.
	VerifyPassword(SHA512, decoy(sha512.New, user), password)
	return nil, false, ErrInvalidCredentials
}

// decoySecret keys the decoy salts: the same user always gets the same
// one within a process, as a stored user would.
var decoySecret = func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}()

func decoy(h func() hash.Hash, user string) Credential {
	salt := mac(sha256.New, decoySecret, []byte(user))[:16]
	size := h().Size()
	return Credential{Salt: salt, StoredKey: make([]byte, size), ServerKey: make([]byte, size), Iterations: MinIterations}
}

// decodeName undoes RFC 5802's saslname escapes (=2C for ',', =3D for '=').
func decodeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("malformed user name escape")
		}
		i += 2
	}
	return b.String(), nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func randomNonce() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
