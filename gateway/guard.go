package gateway

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"tidemark.io/services/platform/kerr"
)

// hostSet is the names the gateway answers to. A browser page on another
// name that resolves to the gateway (DNS rebinding) sends its own name in
// Host, so requests naming any other host are refused.
type hostSet struct {
	any   bool
	names map[string]bool
}

// allowedHosts is the listen host (every local name and address when it
// listens on all interfaces), localhost, 127.0.0.1, ::1, the names and
// addresses in the gateway's certificate, and extra (--rest.allowed.hosts;
// "*" allows any).
func allowedHosts(listen, certFile string, extra []string) (*hostSet, error) {
	s := &hostSet{names: map[string]bool{}}
	add := func(h string) {
		if h = normalHost(h); h != "" {
			s.names[h] = true
		}
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		add(h)
	}
	host, _, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if name, err := os.Hostname(); err == nil {
			add(name)
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					add(n.IP.String())
				}
			}
		}
	} else {
		add(host)
	}
	if certFile != "" {
		names, err := certNames(certFile)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			add(n)
		}
	}
	for _, h := range extra {
		if h == "*" {
			s.any = true
		}
		add(h)
	}
	return s, nil
}

// certNames are the DNS names and IP addresses a PEM certificate serves.
func certNames(file string) ([]string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--tls.cert: %w", err)
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		return nil, fmt.Errorf("--tls.cert %s: no PEM certificate", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("--tls.cert %s: %w", file, err)
	}
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names, nil
}

// normalHost is a Host header's name without port, brackets or trailing
// dot, in lower case.
func normalHost(h string) string {
	h = strings.TrimSpace(h)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return strings.ToLower(h)
}

func (s *hostSet) allows(host string) bool {
	return s.any || s.names[normalHost(host)]
}

// writeMethods are the methods that change something and so take JSON only.
var writeMethods = map[string]bool{
	http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// guard refuses, before anything else runs, what a browser page of
// another site could send: a Host the gateway is not (421), a write whose
// Origin is another site (403), and a write whose body is not JSON (415:
// grpc-gateway would decode a text/plain body, which a page may POST
// anywhere without asking, as JSON). /healthz is left to probes, which
// name whatever address they reach.
func guard(hosts *hostSet, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !hosts.allows(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, kerr.BadField(kerr.InvalidRequest, "Host",
				"Host %q is not a name of this gateway; add it with --rest.allowed.hosts", r.Host))
			return
		}
		if writeMethods[r.Method] {
			if e := crossOrigin(r); e != nil {
				writeError(w, http.StatusForbidden, e)
				return
			}
			if e := notJSON(r); e != nil {
				writeError(w, http.StatusUnsupportedMediaType, e)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses a write a browser sent from a page of another origin.
func crossOrigin(r *http.Request) *kerr.Error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if u, err := url.Parse(o); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	return kerr.BadField(kerr.PolicyViolation, "Origin", "cross-origin request refused (Origin %q, Host %q)", o, r.Host)
}

// notJSON refuses a write whose body is not declared JSON. POST, PUT and
// PATCH need the header even without a body: grpc-gateway reads an empty
// body as the empty request, which a page can send without one. A DELETE
// without a body needs none.
func notJSON(r *http.Request) *kerr.Error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.Method == http.MethodDelete && r.ContentLength == 0 {
		return nil
	}
	if ct == "" {
		return kerr.BadField(kerr.InvalidRequest, "Content-Type",
			"%s needs Content-Type: application/json (none was sent)", r.Method)
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	return kerr.BadField(kerr.InvalidRequest, "Content-Type",
		"%q is not accepted on %s: send the body as JSON with Content-Type: application/json", ct, r.Method)
}
