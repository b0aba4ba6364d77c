package gateway

import (
	"bufio"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestREADME runs the curl commands of README.md's REST section, in order,
// against a gateway in front of a fresh cluster, so that they never rot.
func TestREADME(t *testing.T) {
	cmds := readmeCurls(t)
	tc := startCluster(t)
	g := startGateway(t, tc, nil)
	api := newREST(t, g)
	for _, args := range cmds {
		method, url, body, stream := http.MethodGet, "", "", false
		for i := 0; i < len(args); i++ {
			switch a := args[i]; {
			case a == "-d":
				i++
				method, body = http.MethodPost, args[i]
			case a == "-sN":
				stream = true
			case strings.HasPrefix(a, "127.0.0.1:8080/"):
				url = strings.TrimPrefix(a, "127.0.0.1:8080")
			case a != "curl" && a != "-s":
				t.Fatalf("README: curl option %q is not understood here: %q", a, args)
			}
		}
		if stream {
			resp, closeBody := api.open(method, url, nil)
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			closeBody()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(line, `{"result":`) || err != nil {
				t.Fatalf("README: %q: %d %q %v", args, resp.StatusCode, line, err)
			}
			continue
		}
		var b any
		if body != "" {
			b = body
		}
		if a := api.do(method, url, b); a.status != http.StatusOK {
			t.Fatalf("README: %q: %d %s", args, a.status, a.body)
		}
	}
}

// readmeCurls returns the curl commands of the README's REST section, as
// argument lists (single quotes as the shell reads them; # starts a comment).
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
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
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
