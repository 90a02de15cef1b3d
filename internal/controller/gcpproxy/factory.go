/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package gcpproxy

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/url"
	"slices"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/auth/credentials/impersonate"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/api/option"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/apis/gcp/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/gcp"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
)

// DefaultCallTimeout bounds one Compute Engine call.
const DefaultCallTimeout = gcp.DefaultCallTimeout

const (
	scopeCloudPlatform = "https://www.googleapis.com/auth/cloud-platform"
	keyTypeSA          = "service_account"
	userAgent          = "provider-egressproxy"
)

const (
	errNoSecretRef    = "credentials.secretRef is required when credentials.source is Secret"
	errNoImpersonate  = "credentials.impersonateServiceAccount.name is required when credentials.source is ImpersonateServiceAccount"
	errFmtSource      = "unknown credentials.source %q: it must be Secret, InjectedIdentity or ImpersonateServiceAccount"
	errFmtKeyJSON     = "Secret %s key %s does not hold a JSON service account key"
	errFmtKeyType     = "Secret %s key %s holds credentials of type %q: only service account keys (type %q) are accepted from a Secret; for workload identity federation use credentials.source InjectedIdentity or ImpersonateServiceAccount"
	errFmtKeyLoad     = "cannot load the service account key in Secret %s key %s"
	errFmtKeyFields   = "cannot load the service account key in Secret %s key %s: it needs client_email and a PEM private_key (PKCS #8 or PKCS #1)"
	errDefaultCreds   = "cannot find application default credentials for credentials.source InjectedIdentity (workload identity, or GOOGLE_APPLICATION_CREDENTIALS)"
	errFmtImpersonate = "cannot impersonate service account %s"
	errFmtEndpoint    = "spec.endpoint %q must be an https URL (http is accepted for loopback addresses only): the provider sends access tokens to it"
	errFmtTokenURI    = "the service account key in Secret %s key %s names token_uri %q: only " + googleTokenURI + " (or the host of spec.endpoint) is accepted, as the provider posts a signed assertion to it"
	errFmtUniverse    = "the service account key in Secret %s key %s names universe_domain %q: only " + googleUniverse + " is accepted"
)

// What a service account key may name: the provider posts to its token_uri
// from its own pod, and a universe_domain of its choice turns the Compute
// Engine endpoint into compute.<domain>.
const (
	googleTokenURI = "https://oauth2.googleapis.com/token"
	googleUniverse = "googleapis.com"
)

// FactoryOption configures NewFactory.
type FactoryOption func(*factory)

// WithCallTimeout bounds every Compute Engine call.
func WithCallTimeout(d time.Duration) FactoryOption {
	return func(f *factory) { f.timeout = d }
}

// WithDeletions closes the backend of a config when it is deleted.
func WithDeletions(d *proxy.Deletions) FactoryOption {
	return func(f *factory) { f.cache.ForgetOn(d) }
}

// WithDefaultCredentials replaces application default credentials: the
// InjectedIdentity source uses them, and ImpersonateServiceAccount
// impersonates with them. For tests and for `make dev`, outside GCP.
func WithDefaultCredentials(c *auth.Credentials) FactoryOption {
	return func(f *factory) { f.defaultCreds = c }
}

// WithClientOptions adds options to every Compute Engine client, after the
// provider config's own.
func WithClientOptions(o ...option.ClientOption) FactoryOption {
	return func(f *factory) { f.clientOpts = append(f.clientOpts, o...) }
}

// WithBackendOptions configures every backend the factory builds.
func WithBackendOptions(o ...gcp.Option) FactoryOption {
	return func(f *factory) { f.backendOpts = append(f.backendOpts, o...) }
}

type factory struct {
	timeout      time.Duration
	defaultCreds *auth.Credentials
	clientOpts   []option.ClientOption
	backendOpts  []gcp.Option
	cache        *proxy.ClientCache[Backend]
}

// NewFactory returns the factory of gcp backends. It keeps one backend (and
// its REST clients) per provider config, rebuilt and the old one closed when
// the config or its credentials Secret changes, so a rotated key takes
// effect without a restart.
func NewFactory(o ...FactoryOption) BackendFactory {
	f := &factory{timeout: DefaultCallTimeout, cache: proxy.NewClientCache[Backend]()}
	for _, fn := range o {
		fn(f)
	}
	return f.backend
}

func (f *factory) backend(ctx context.Context, kube client.Client, cfg proxy.Config) (Backend, error) {
	spec, err := proxy.ConfigSpec[v1alpha1.ProviderConfigSpec](cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckSource(string(spec.Credentials.Source)); err != nil {
		return nil, err
	}
	if err := checkEndpoint(spec.Endpoint); err != nil {
		return nil, err
	}
	key := cfg.CacheKey()
	switch src := spec.Credentials.Source; src {
	case v1alpha1.CredentialsSourceSecret:
		ref := spec.Credentials.SecretRef
		if ref == nil {
			return nil, backend.Permanent(errors.New(errNoSecretRef))
		}
		sa, rv, err := cfg.SecretKey(ctx, kube, *ref)
		if err != nil {
			return nil, err
		}
		return f.cache.Get(key, cfg.CacheVersion(rv), func() (Backend, error) {
			c, err := serviceAccountCredentials(sa, cfg.SecretLocation(ref.SecretReference), ref.Key, spec.Endpoint)
			if err != nil {
				return nil, err
			}
			return f.newBackend(ctx, cfg, spec, c)
		})
	case v1alpha1.CredentialsSourceInjectedIdentity:
		return f.cache.Get(key, cfg.CacheVersion(""), func() (Backend, error) {
			c, err := f.injectedCredentials()
			if err != nil {
				return nil, err
			}
			return f.newBackend(ctx, cfg, spec, c)
		})
	case v1alpha1.CredentialsSourceImpersonateServiceAccount:
		sa := spec.Credentials.ImpersonateServiceAccount
		if sa == nil || sa.Name == "" {
			return nil, backend.Permanent(errors.New(errNoImpersonate))
		}
		return f.cache.Get(key, cfg.CacheVersion(""), func() (Backend, error) {
			c, err := impersonate.NewCredentials(&impersonate.CredentialsOptions{
				TargetPrincipal: sa.Name, Scopes: []string{scopeCloudPlatform}, Credentials: f.defaultCreds,
			})
			if err != nil {
				return nil, backend.Permanent(errors.Wrapf(err, errFmtImpersonate, sa.Name))
			}
			return f.newBackend(ctx, cfg, spec, c)
		})
	default:
		return nil, backend.Permanent(errors.Errorf(errFmtSource, src))
	}
}

func (f *factory) injectedCredentials() (*auth.Credentials, error) {
	if f.defaultCreds != nil {
		return f.defaultCreds, nil
	}
	c, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{scopeCloudPlatform}})
	if err != nil {
		return nil, backend.Permanent(errors.Wrap(err, errDefaultCreds))
	}
	return c, nil
}

func (f *factory) newBackend(ctx context.Context, cfg proxy.Config, spec v1alpha1.ProviderConfigSpec, c *auth.Credentials) (Backend, error) {
	opts := []option.ClientOption{option.WithAuthCredentials(c), option.WithUserAgent(userAgent)}
	if spec.Endpoint != nil && *spec.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(*spec.Endpoint))
	}
	opts = append(opts, f.clientOpts...)
	// The policy is part of the config's spec: a change bumps its
	// generation, so the cache builds a backend with the new one.
	var policy v1alpha1.GCPPolicy
	if spec.Policy.GCP != nil {
		policy = *spec.Policy.GCP
	}
	sas := append(slices.Clone(spec.AllowedServiceAccounts), policy.ServiceAccounts...)
	bo := append([]gcp.Option{
		gcp.WithCallTimeout(f.timeout), gcp.WithPolicy(configName(cfg), policy), gcp.WithAllowedServiceAccounts(configName(cfg), sas...),
	}, f.backendOpts...)
	// The clients outlive this reconcile: they must not inherit its end.
	b, err := gcp.New(context.WithoutCancel(ctx), spec.ProjectID, opts, bo...)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// configName names a provider config in errors, as its kind and name.
func configName(cfg proxy.Config) string {
	o := cfg.Object
	kind := v1alpha1.ClusterProviderConfigKind
	if _, ok := o.(*v1alpha1.ProviderConfig); ok {
		kind = v1alpha1.ProviderConfigKind
	}
	if ns := o.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + o.GetName()
	}
	return kind + " " + o.GetName()
}

// serviceAccountCredentials loads a service account JSON key from a Secret.
// It checks the key's type itself: other types (external_account above all)
// make the auth library run programs, read files or call URLs the JSON
// names, which a Secret must never be able to make the provider do. So is
// a token_uri other than Google's (or, for a fake, spec.endpoint's host).
func serviceAccountCredentials(key []byte, secret, secretKey string, endpoint *string) (*auth.Credentials, error) {
	var k struct {
		Type           string `json:"type"`
		ClientEmail    string `json:"client_email"`
		PrivateKey     string `json:"private_key"`
		TokenURI       string `json:"token_uri"`
		UniverseDomain string `json:"universe_domain"`
	}
	if err := json.Unmarshal(key, &k); err != nil {
		// The parse error is left out: it may quote the key.
		return nil, backend.Permanent(errors.Errorf(errFmtKeyJSON, secret, secretKey))
	}
	if k.Type != keyTypeSA {
		return nil, backend.Permanent(errors.Errorf(errFmtKeyType, secret, secretKey, k.Type, keyTypeSA))
	}
	if !allowedTokenURI(k.TokenURI, endpoint) {
		return nil, backend.Permanent(errors.Errorf(errFmtTokenURI, secret, secretKey, k.TokenURI))
	}
	if k.UniverseDomain != "" && k.UniverseDomain != googleUniverse {
		return nil, backend.Permanent(errors.Errorf(errFmtUniverse, secret, secretKey, k.UniverseDomain))
	}
	// The auth library reads the private key only when it first needs a
	// token; checking it here reports a broken key at once, and clearly.
	if k.ClientEmail == "" || !parsablePrivateKey(k.PrivateKey) {
		return nil, backend.Permanent(errors.Errorf(errFmtKeyFields, secret, secretKey))
	}
	c, err := credentials.NewCredentialsFromJSON(credentials.ServiceAccount, key, &credentials.DetectOptions{Scopes: []string{scopeCloudPlatform}})
	if err != nil {
		return nil, backend.Permanent(errors.Wrapf(err, errFmtKeyLoad, secret, secretKey))
	}
	return c, nil
}

// allowedTokenURI reports whether the provider may post to uri: Google's
// token endpoint (the library's default when uri is empty), or the scheme
// and host name of endpoint, which checkEndpoint vets (a fake, or a private
// Google endpoint), on any port: a fake's token endpoint is not always on
// the port its API is reached through (a relay in front of it).
func allowedTokenURI(uri string, endpoint *string) bool {
	if uri == "" || uri == googleTokenURI {
		return true
	}
	if endpoint == nil || *endpoint == "" {
		return false
	}
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	e, err := url.Parse(*endpoint)
	return err == nil && e.Host != "" && u.Scheme == e.Scheme && u.Hostname() == e.Hostname() && u.User == nil
}

func parsablePrivateKey(pemKey string) bool {
	block, _ := pem.Decode([]byte(pemKey))
	if block == nil {
		return false
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return true
	}
	_, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	return err == nil
}

// checkEndpoint refuses an endpoint that would carry access tokens in clear
// text over a network.
func checkEndpoint(ep *string) error {
	if ep == nil || *ep == "" {
		return nil
	}
	u, err := url.Parse(*ep)
	if err != nil || u.Host == "" {
		return backend.Permanent(errors.Errorf(errFmtEndpoint, *ep))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || isLoopback(h) {
			return nil
		}
	}
	return backend.Permanent(errors.Errorf(errFmtEndpoint, *ep))
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
