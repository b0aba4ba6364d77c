package gateway

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/platform/pki"
)

// TestREADME runs the curl commands of README.md's REST section, in order,
// against a gateway in front of a fresh cluster, so that they never rot:
// over HTTPS, with the cluster's mutual TLS and a tokens file, the files
// of .data/pki read from the test's CA directory and $TOKEN its token.
func TestREADME(t *testing.T) {
	cmds := readmeCurls(t)
	tc, g := startSecureCluster(t, aliceMayDoAll, "# token user\n"+aliceToken+" alice\n", nil)
	base := "https://" + g.Addr()
	file := func(p string) string { return strings.Replace(p, ".data/pki/", tc.PKIDir+"/", 1) }
	for _, args := range cmds {
		var (
			method, url, body, ca, cert, key = http.MethodGet, "", "", "", "", ""
			stream                           bool
			hdr                              []string
		)
		for i := 0; i < len(args); i++ {
			next := func() string {
				i++
				if i == len(args) {
					t.Fatalf("README: %q: %s without its value", args, args[i-1])
				}
				return args[i]
			}
			switch a := args[i]; {
			case a == "-d":
				method, body = http.MethodPost, next()
			case a == "-H":
				k, v, _ := strings.Cut(strings.ReplaceAll(next(), "$TOKEN", aliceToken), ":")
				hdr = append(hdr, k, strings.TrimSpace(v))
			case a == "--cacert":
				ca = file(next())
			case a == "--cert":
				cert = file(next())
			case a == "--key":
				key = file(next())
			case a == "-sN":
				stream = true
			case strings.HasPrefix(a, "https://127.0.0.1:8080/"):
				url = strings.TrimPrefix(a, "https://127.0.0.1:8080")
			case a != "curl" && a != "-s":
				t.Fatalf("README: curl option %q is not understood here: %q", a, args)
			}
		}
		if ca != pki.CAPath(tc.PKIDir) {
			t.Fatalf("README: %q does not trust the dev cluster's CA", args)
		}
		s := &secureSetup{dir: tc.PKIDir, base: base}
		hc := s.client(t, "", "")
		if cert != "" {
			name := strings.TrimSuffix(filepath.Base(cert), ".pem")
			if cert != pki.CertPath(tc.PKIDir, name) || key != pki.KeyPath(tc.PKIDir, name) {
				t.Fatalf("README: %q: --cert and --key are not one pair of .data/pki", args)
			}
			hc = s.client(t, tc.PKIDir, name)
		}
		if stream {
			resp, err := s.send(hc, method, url, body, hdr...)
			if err != nil {
				t.Fatalf("README: %q: %v", args, err)
			}
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(line, `{"result":`) || err != nil {
				t.Fatalf("README: %q: %d %q %v", args, resp.StatusCode, line, err)
			}
			continue
		}
		a := s.req(t, hc, method, url, body, hdr...)
		// A fresh cluster's group coordinator answers so while it loads its
		// partition of __consumer_offsets; the README says to retry.
		for deadline := time.Now().Add(15 * time.Second); a.status == http.StatusServiceUnavailable &&
			strings.Contains(string(a.body), `"COORDINATOR_LOAD_IN_PROGRESS"`) && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			a = s.req(t, hc, method, url, body, hdr...)
		}
		if a.status != http.StatusOK {
			t.Fatalf("README: %q: %d %s", args, a.status, a.body)
		}
	}
}

// readmeCurls returns the curl commands of the README's REST section, as
// argument lists (quotes as the shell reads them, $TOKEN left for the test;
// # starts a comment).
func readmeCurls(t *testing.T) [][]string {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## REST\n")
	if !ok {
		t.Fatal("README.md has no REST section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out [][]string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "curl ") {
			out = append(out, shellWords(line))
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md's REST section has no curl commands")
	}
	return out
}

func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted, dquoted := false, false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case dquoted && r == '"':
			dquoted = false
		case quoted || dquoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == '"':
			dquoted, inWord = true, true
		case r == '#' && !inWord:
			return words
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
