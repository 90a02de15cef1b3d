package gcpfake

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// CallToken counts exchanges at the OAuth token endpoint, POST /token.
const CallToken = "oauth2.token"

const (
	jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

	errNotStarted = "the server is not started, so a key cannot name its token_uri"
	errGenerate   = "cannot generate an RSA key"
	errMarshalKey = "cannot encode the private key"
	errJWTFormat  = "malformed JWT"
	errJWTKey     = "account not found"
	errJWTSig     = "Invalid JWT Signature."
	errJWTExpired = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
)

// authority is the fake's OAuth server: it knows the public keys of the
// service-account keys it generated and the access tokens it issued.
type authority struct {
	mu     sync.Mutex
	now    func() time.Time
	keys   map[string]*rsa.PublicKey // client_email -> key
	tokens map[string]bool
	issued int
}

func newAuthority(now func() time.Time) *authority {
	return &authority{now: now, keys: map[string]*rsa.PublicKey{}, tokens: map[string]bool{}}
}

func (a *authority) validBearer(header string) bool {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	a.mu.Lock()
	defer a.mu.Unlock()
	return ok && a.tokens[strings.TrimSpace(tok)]
}

// AddAccessToken makes tok a valid bearer token, as a caller holding a
// token minted elsewhere (the AccessToken credential source) would need.
func (s *Server) AddAccessToken(tok string) {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	s.auth.tokens[tok] = true
}

// TokensIssued returns how many access tokens the token endpoint issued.
func (s *Server) TokensIssued() int {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return s.auth.issued
}

// NewServiceAccountKey generates a service-account JSON key (type
// service_account, a fresh RSA key, token_uri = URL()+"/token") and trusts
// it, so the real credentials path — a signed JWT exchanged for an access
// token — works against the fake. Email defaults to
// gcpfake@gcpfake-project.iam.gserviceaccount.com; project_id is taken from
// its domain.
func (s *Server) NewServiceAccountKey(email string) ([]byte, error) {
	if s.url == "" {
		return nil, errors.New(errNotStarted)
	}
	if email == "" {
		email = "gcpfake@gcpfake-project.iam.gserviceaccount.com"
	}
	pk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, errors.Wrap(err, errGenerate)
	}
	der, err := x509.MarshalPKCS8PrivateKey(pk)
	if err != nil {
		return nil, errors.Wrap(err, errMarshalKey)
	}
	kid := sha256.Sum256(der)
	_, domain, _ := strings.Cut(email, "@")
	project, _, _ := strings.Cut(domain, ".")
	key := map[string]string{
		"type":                        "service_account",
		"project_id":                  project,
		"private_key_id":              hex.EncodeToString(kid[:20]),
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                email,
		"client_id":                   fmt.Sprintf("1%020d", kid[0]),
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   s.url + "/token",
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"client_x509_cert_url":        "https://www.googleapis.com/robot/v1/metadata/x509/" + email,
		"universe_domain":             "googleapis.com",
	}
	b, err := json.MarshalIndent(key, "", "  ")
	if err != nil {
		return nil, errors.Wrap(err, errMarshalKey)
	}
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	s.auth.keys[email] = &pk.PublicKey
	return b, nil
}

// handleToken implements the jwt-bearer grant of RFC 7523 as Google's token
// endpoint does: verify the RS256 assertion against a known key, then issue
// an opaque bearer token.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	s.calls.inc(CallToken)
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != jwtBearer {
		writeOAuthError(w, "unsupported_grant_type", "Invalid grant_type: "+r.PostForm.Get("grant_type"))
		return
	}
	if err := s.auth.verify(r.PostForm.Get("assertion")); err != nil {
		writeOAuthError(w, "invalid_grant", err.Error())
		return
	}
	s.auth.mu.Lock()
	s.auth.issued++
	tok := fmt.Sprintf("ya29.gcpfake-%d-%x", s.auth.issued, s.auth.now().UnixNano())
	s.auth.tokens[tok] = true
	s.auth.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "expires_in": 3599, "token_type": "Bearer"})
}

func (a *authority) verify(assertion string) error {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return errors.New(errJWTFormat)
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss string `json:"iss"`
		Exp int64  `json:"exp"`
	}
	if decodeSegment(parts[0], &hdr) != nil || decodeSegment(parts[1], &claims) != nil || hdr.Alg != "RS256" {
		return errors.New(errJWTFormat)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return errors.New(errJWTFormat)
	}
	a.mu.Lock()
	pub := a.keys[claims.Iss]
	now := a.now()
	a.mu.Unlock()
	if pub == nil {
		return errors.New(errJWTKey)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		return errors.New(errJWTSig)
	}
	if claims.Exp < now.Unix() {
		return errors.New(errJWTExpired)
	}
	return nil
}

func decodeSegment(seg string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return errors.Wrap(err, errJWTFormat)
	}
	return errors.Wrap(json.Unmarshal(b, into), errJWTFormat)
}

func writeOAuthError(w http.ResponseWriter, code, desc string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}
