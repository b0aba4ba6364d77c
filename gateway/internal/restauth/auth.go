package restauth

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"tidemark.io/gateway/internal/resterr"
	"tidemark.io/services/platform/identity"
	"tidemark.io/services/platform/kerr"
)

// SessionCookie names the console's session cookie.
const SessionCookie = "tidemark_session"

// maxLoginBody bounds a login request.
const maxLoginBody = 4 << 10

// Options configures an Authenticator.
type Options struct {
	// Required turns authentication on: every protected request needs a
	// bearer token, a verified client certificate or a session. Off, only
	// credentials are stripped before the request goes on.
	Required bool
	// Tokens is the tokens file; nil accepts no token (certificates only).
	Tokens *Tokens
	// SessionTTL is how long a console login lasts.
	SessionTTL time.Duration
	Log        *slog.Logger
}

// Authenticator decides who a request is from.
type Authenticator struct {
	o        Options
	log      *slog.Logger
	sessions *sessions
}

// New makes an Authenticator.
func New(o Options) *Authenticator {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 8 * time.Hour
	}
	return &Authenticator{o: o, log: log, sessions: newSessions(o.SessionTTL)}
}

// Protect authenticates every request before next and records its user
// (WithUser), or answers 401 SASL_AUTHENTICATION_FAILED. Whether or not
// authentication is required, the request's credentials (Authorization
// and cookies) are removed before next sees it, so that they never travel
// further.
func (a *Authenticator) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.o.Required {
			stripCredentials(r)
			next.ServeHTTP(w, r)
			return
		}
		user, how, still, err := a.authenticate(r)
		stripCredentials(r)
		if err != nil {
			a.log.Info("REST caller not authenticated", "method", r.Method, "path", r.URL.Path,
				"remote", r.RemoteAddr, "reason", err.Message)
			refuse(w, err)
			return
		}
		a.log.Debug("REST caller authenticated", "user", user, "by", how, "method", r.Method, "path", r.URL.Path)
		ctx := WithUser(r.Context(), user)
		if still != nil {
			// A stream (a follow, a watch, the console's events) lives
			// as long as its credential: checked again every
			// revalidateEvery, it ends once the session is logged out
			// or expired or the token removed from the file. Checked
			// only on arrival, streams outlived a logout.
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			stop := revalidate(still, func() {
				a.log.Info("ending a REST call: its credential is no longer valid", "user", user, "by", how, "path", r.URL.Path)
				cancel(errCredentialGone)
			})
			defer stop()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// revalidateEvery is how often a call in progress checks that its token
// or session is still valid.
const revalidateEvery = time.Second

var errCredentialGone = errors.New("the call's token or session is no longer valid")

// revalidate calls gone once still reports false, checking every
// revalidateEvery on a timer (no goroutine: most calls end before the
// first check). stop ends the checks.
func revalidate(still func() bool, gone func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock() // t is read under mu by the checks
	defer mu.Unlock()
	t = time.AfterFunc(revalidateEvery, func() {
		mu.Lock()
		done := stopped
		mu.Unlock()
		if done {
			return
		}
		if !still() {
			gone()
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(revalidateEvery)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

func stripCredentials(r *http.Request) {
	r.Header.Del("Authorization")
	r.Header.Del("Cookie")
}

func refuse(w http.ResponseWriter, e *kerr.Error) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tidemark"`)
	resterr.Write(w, http.StatusUnauthorized, e)
}

func unauthenticated(format string, args ...any) *kerr.Error {
	return kerr.New(kerr.SaslAuthenticationFailed, format, args...)
}

// authenticate tries, in order, the Authorization header (a wrong token is
// refused even when a certificate or session would do: the caller meant
// the token), the client certificate, then the session cookie. still, for
// a token or a session, says whether the credential is valid yet (a
// certificate is checked by the TLS handshake, once). Messages never hold
// the credential.
func (a *Authenticator) authenticate(r *http.Request) (user, how string, still func() bool, _ *kerr.Error) {
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		if len(h) > 1 {
			return "", "", nil, unauthenticated("more than one Authorization header")
		}
		scheme, token, _ := strings.Cut(strings.TrimSpace(h[0]), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", "", nil, unauthenticated("the Authorization scheme must be Bearer")
		}
		token = strings.TrimSpace(token)
		if u, ok := a.lookup(token); ok {
			return u, "token", func() bool { _, ok := a.lookup(token); return ok }, nil
		}
		return "", "", nil, unauthenticated("the bearer token is not valid")
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		p := identity.FromTLS(r.TLS)
		if err := CheckUserName(p.Name); err != nil {
			return "", "", nil, unauthenticated("client certificate: %v", err)
		}
		return p.Name, "certificate", nil, nil
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		id := c.Value
		ss, ok := a.sessions.get(id)
		if !ok {
			return "", "", nil, unauthenticated("the console session expired or is unknown; log in again")
		}
		u, ok := a.byDigest(ss.token)
		if !ok {
			a.sessions.close(id)
			return "", "", nil, unauthenticated("the console session's token was revoked; log in again")
		}
		still := func() bool {
			ss, ok := a.sessions.get(id)
			if ok {
				_, ok = a.byDigest(ss.token)
			}
			return ok
		}
		return u, "session", still, nil
	}
	return "", "", nil, unauthenticated("not authenticated: send Authorization: Bearer TOKEN, " +
		"a client certificate signed by the cluster's CA, or log in with POST /v1/login")
}

func (a *Authenticator) lookup(token string) (string, bool) {
	if a.o.Tokens == nil {
		return "", false
	}
	return a.o.Tokens.Lookup(token)
}

func (a *Authenticator) byDigest(d digest) (string, bool) {
	if a.o.Tokens == nil {
		return "", false
	}
	return a.o.Tokens.lookupDigest(d)
}

// loginRequest is POST /v1/login's body.
type loginRequest struct {
	Token string `json:"token"`
}

// loginResponse is its answer.
type loginResponse struct {
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Login serves POST /v1/login {"token": "..."}: a valid token opens a
// session, answered with its cookie (HttpOnly, Secure, SameSite=Strict;
// the console's EventSource cannot send an Authorization header).
func (a *Authenticator) Login(w http.ResponseWriter, r *http.Request) {
	stripCredentials(r)
	if !a.o.Required {
		resterr.Write(w, http.StatusNotFound, kerr.New(kerr.InvalidRequest,
			"REST authentication is off (--plaintext without --rest.auth.required): there is nothing to log in to"))
		return
	}
	var req loginRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLoginBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			resterr.Write(w, http.StatusRequestEntityTooLarge, kerr.New(kerr.InvalidRequest, "login body is larger than %d bytes", mbe.Limit))
			return
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			resterr.Write(w, http.StatusRequestTimeout, kerr.New(kerr.RequestTimedOut, "the login body did not arrive in time"))
			return
		}
		// The decoder's message may quote the body, which holds a token.
		resterr.Write(w, http.StatusBadRequest, kerr.BadField(kerr.InvalidRequest, "token", `login takes a JSON body {"token": "..."}`))
		return
	}
	if req.Token == "" {
		resterr.Write(w, http.StatusBadRequest, kerr.BadField(kerr.InvalidRequest, "token", "token is required"))
		return
	}
	user, ok := a.lookup(req.Token)
	if !ok {
		a.log.Info("console login refused", "remote", r.RemoteAddr, "reason", "token not valid")
		refuse(w, unauthenticated("the token is not valid"))
		return
	}
	id, exp := a.sessions.open(digestOf(req.Token), user)
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: id, Path: "/",
		Expires: exp, MaxAge: int(time.Until(exp).Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	a.log.Info("console login", "user", user, "remote", r.RemoteAddr, "expires", exp)
	writeJSON(w, loginResponse{User: user, ExpiresAt: exp.UTC()})
}

// Logout serves POST /v1/logout: the session ends and its cookie is
// cleared.
func (a *Authenticator) Logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		a.sessions.close(c.Value)
	}
	stripCredentials(r)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, struct{}{})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
