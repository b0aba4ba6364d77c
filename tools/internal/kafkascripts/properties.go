package kafkascripts

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// readProperties reads a Java properties file the way Kafka's scripts read
// --command-config: `key=value`, `key: value` or `key value`, # and !
// comments, a trailing backslash continuing the line.
func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024) // inline PEM certificates make long lines
	var pending string
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line, pending = pending+line, ""
		key, value := splitProperty(line)
		props[key] = value
	}
	if pending != "" {
		key, value := splitProperty(pending)
		props[key] = value
	}
	return props, sc.Err()
}

func splitProperty(line string) (key, value string) {
	i := strings.IndexAny(line, "=: \t")
	if i < 0 {
		return line, ""
	}
	key, rest := line[:i], strings.TrimLeft(line[i:], " \t")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	return key, strings.ReplaceAll(rest, `\n`, "\n")
}

// clientOptions turns --command-config's properties into the Kafka
// client's options. The security protocols are the Kafka listener's:
// PLAINTEXT, SSL (mutual TLS, the client certificate naming the
// principal), and SASL_PLAINTEXT and SASL_SSL with sasl.mechanism PLAIN,
// SCRAM-SHA-256 or SCRAM-SHA-512 and the user name and password of
// sasl.jaas.config (saslOptions); the stores are PEM (KIP-651), as files
// (ssl.truststore.location, ssl.keystore.location: the private key and the
// certificate chain in one file) or inline (ssl.truststore.certificates,
// ssl.keystore.certificate.chain with ssl.keystore.key). Other client
// settings are accepted and left alone, as Kafka's admin client only warns
// about names it does not know.
func clientOptions(props map[string]string) ([]kgo.Opt, error) {
	proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	var opts []kgo.Opt
	switch proto {
	case "", "PLAINTEXT":
		return nil, nil
	case "SSL":
	case "SASL_PLAINTEXT", "SASL_SSL":
		m, err := saslMechanism(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
		if proto == "SASL_PLAINTEXT" {
			return opts, nil
		}
	default:
		return nil, fmt.Errorf("Invalid value %s for configuration security.protocol: String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", props["security.protocol"])
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	roots, err := trustStore(props)
	if err != nil {
		return nil, err
	}
	cfg.RootCAs = roots
	cert, err := keyStore(props)
	if err != nil {
		return nil, err
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	if alg, set := props["ssl.endpoint.identification.algorithm"]; set && strings.TrimSpace(alg) == "" {
		// Kafka's way of turning host name checks off: the chain is still
		// verified against the trust store.
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = verifyChainOnly(roots)
	}
	return append(opts, kgo.DialTLSConfig(cfg)), nil
}

// jaasCredential reads username="..." and password="..." from a
// sasl.jaas.config, as Kafka's PlainLoginModule and ScramLoginModule take
// them.
var jaasCredential = regexp.MustCompile(`(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// saslMechanism is the login sasl.mechanism and sasl.jaas.config ask for.
func saslMechanism(props map[string]string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	if mech == "" {
		mech = "GSSAPI" // Kafka's default
	}
	creds := map[string]string{}
	for _, m := range jaasCredential.FindAllStringSubmatch(props["sasl.jaas.config"], -1) {
		creds[m[1]] = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
	}
	user, pass := creds["username"], creds["password"]
	if mech != "GSSAPI" && (user == "" || pass == "") {
		return nil, fmt.Errorf("sasl.jaas.config: needs username=\"...\" and password=\"...\" for sasl.mechanism=%s", mech)
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl.mechanism=%s: tidemark's SASL listeners serve PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", mech)
}

func checkPEMType(props map[string]string, key string) error {
	if t, ok := props[key]; ok && !strings.EqualFold(strings.TrimSpace(t), "PEM") {
		return fmt.Errorf("%s=%s: only PEM stores are supported (KIP-651: %s=PEM)", key, t, key)
	}
	return nil
}

// trustStore is the CAs to trust: nil (the system's) when none is given.
func trustStore(props map[string]string) (*x509.CertPool, error) {
	if err := checkPEMType(props, "ssl.truststore.type"); err != nil {
		return nil, err
	}
	var data []byte
	switch {
	case props["ssl.truststore.certificates"] != "":
		data = inlinePEM(props["ssl.truststore.certificates"])
	case props["ssl.truststore.location"] != "":
		b, err := os.ReadFile(props["ssl.truststore.location"])
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		data = b
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("ssl.truststore: no PEM certificate in it")
	}
	return pool, nil
}

// keyStore is the client certificate: nil when none is given.
func keyStore(props map[string]string) (*tls.Certificate, error) {
	if err := checkPEMType(props, "ssl.keystore.type"); err != nil {
		return nil, err
	}
	var certPEM, keyPEM []byte
	switch {
	case props["ssl.keystore.certificate.chain"] != "" || props["ssl.keystore.key"] != "":
		certPEM, keyPEM = inlinePEM(props["ssl.keystore.certificate.chain"]), inlinePEM(props["ssl.keystore.key"])
	case props["ssl.keystore.location"] != "":
		b, err := os.ReadFile(props["ssl.keystore.location"])
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		certPEM, keyPEM = b, b
	default:
		return nil, nil
	}
	for rest := keyPEM; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, errors.New("ssl.keystore: the private key is encrypted (ssl.key.password); give it unencrypted")
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore: %w", err)
	}
	return &cert, nil
}

// pemBlock is one PEM block written on one line, as a properties value
// continued with backslashes becomes (the continuation drops the line
// breaks; Kafka's PEM reader does not need them, Go's does).
var pemBlock = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]+)-----([A-Za-z0-9+/=\s]*?)-----END ([A-Z0-9 ]+)-----`)

// inlinePEM restores the line breaks of PEM blocks given inline.
func inlinePEM(value string) []byte {
	return []byte(pemBlock.ReplaceAllStringFunc(value, func(block string) string {
		m := pemBlock.FindStringSubmatch(block)
		body := strings.Join(strings.Fields(m[2]), "")
		var b strings.Builder
		b.WriteString("-----BEGIN " + m[1] + "-----\n")
		for len(body) > 64 {
			b.WriteString(body[:64] + "\n")
			body = body[64:]
		}
		if body != "" {
			b.WriteString(body + "\n")
		}
		b.WriteString("-----END " + m[3] + "-----\n")
		return b.String()
	}))
}

// verifyChainOnly verifies the server's chain against roots without
// matching its name.
func verifyChainOnly(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("the server sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}
