/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package kubernetesproxy

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egressproxy/provider-egressproxy/apis/kubernetes/v1alpha1"
	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/kubernetes"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	rules "github.com/egressproxy/provider-egressproxy/internal/policy"
)

// DefaultCallTimeout bounds one call to a target cluster.
const DefaultCallTimeout = 30 * time.Second

// Client rate limits per target cluster without WithReconcileRate: above
// client-go's defaults (5/10), as one provider config serves many proxies.
const (
	clientQPS   = 20
	clientBurst = 40
)

const (
	errFmtParseKubeconfig = "cannot parse the kubeconfig in Secret %s key %s"
	errFmtUnsafeKubecfg   = "the kubeconfig in Secret %s key %s uses %s, which the provider does not allow: give the credentials inline (token or client certificate data)"
	errNoSecretRef        = "credentials.secretRef is required when credentials.source is Secret"
	errFmtSource          = "unknown credentials.source %q: it must be Secret or InjectedIdentity"
	errInCluster          = "credentials.source InjectedIdentity needs the provider to run in the target cluster"
)

// FactoryOption configures NewFactory.
type FactoryOption func(*factory)

// WithInjectedConfig makes the InjectedIdentity source use cfg instead of
// the in-cluster config: for tests, and for `make dev`, where the provider
// runs outside the cluster it manages.
func WithInjectedConfig(cfg *rest.Config) FactoryOption {
	return func(f *factory) { f.injected = cfg }
}

// WithReconcileRate sizes the client of a target cluster for r reconciles
// per second, as the provider's own (ratelimiter.LimitRESTConfig): a new
// proxy is four creates, which at the fixed 20 per second (per kind) made
// 1000 new proxies wait minutes for the client. A kubeconfig's own limits
// win.
func WithReconcileRate(r int) FactoryOption {
	return func(f *factory) { f.rate = r }
}

// WithDeletions closes the backend of a config when it is deleted.
func WithDeletions(d *proxy.Deletions) FactoryOption {
	return func(f *factory) { f.cache.ForgetOn(d) }
}

// WithCallTimeout bounds every call to a target cluster.
func WithCallTimeout(d time.Duration) FactoryOption {
	return func(f *factory) { f.timeout = d }
}

type factory struct {
	injected *rest.Config
	timeout  time.Duration
	rate     int
	cache    *proxy.ClientCache[Backend]
}

// NewFactory returns the factory of kubernetes backends. It keeps one backend
// per provider config, rebuilt when the config or its kubeconfig Secret
// changes, so a rotated kubeconfig takes effect without a restart.
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
	// The generation is part of the cache key, so a changed allowlist
	// rebuilds the backend with the new policy.
	key := cfg.CacheKey()
	p := policy(cfg, spec)
	switch src := spec.Credentials.Source; src {
	case v1alpha1.CredentialsSourceSecret:
		ref := spec.Credentials.SecretRef
		if ref == nil {
			return nil, backend.Permanent(errors.New(errNoSecretRef))
		}
		kc, rv, err := cfg.SecretKey(ctx, kube, *ref)
		if err != nil {
			return nil, err
		}
		return f.cache.Get(key, cfg.CacheVersion(rv), func() (Backend, error) {
			rc, err := restConfigFromKubeconfig(kc, cfg.SecretLocation(ref.SecretReference), ref.Key)
			if err != nil {
				return nil, err
			}
			return f.newBackend(rc, p)
		})
	case v1alpha1.CredentialsSourceInjectedIdentity:
		return f.cache.Get(key, cfg.CacheVersion(""), func() (Backend, error) {
			rc := f.injected
			if rc == nil {
				if rc, err = rest.InClusterConfig(); err != nil {
					return nil, backend.Permanent(errors.Wrap(err, errInCluster))
				}
			}
			return f.newBackend(rc, p)
		})
	default:
		return nil, backend.Permanent(errors.Errorf(errFmtSource, src))
	}
}

// policy returns what the proxies of cfg may ask of the target cluster,
// named after the config for messages.
func policy(cfg proxy.Config, spec v1alpha1.ProviderConfigSpec) kubernetes.Policy {
	name := v1alpha1.ClusterProviderConfigKind + " " + cfg.Object.GetName()
	if ns := cfg.Object.GetNamespace(); ns != "" {
		name = v1alpha1.ProviderConfigKind + " " + ns + "/" + cfg.Object.GetName()
	}
	// The connector and the function read the config's rules so too.
	return rules.KubernetesOf(spec, name)
}

func (f *factory) newBackend(rc *rest.Config, p kubernetes.Policy) (Backend, error) {
	rc = rest.CopyConfig(rc)
	rc.Timeout = f.timeout
	rc.UserAgent = "provider-egressproxy"
	// Every warning, remembering none: a target is any API server a
	// namespaced ProviderConfig names, and what it sends must not grow the
	// provider's memory.
	rc.WarningHandlerWithContext = ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{})
	switch {
	case rc.QPS != 0:
	case f.rate > 0:
		rc = ratelimiter.LimitRESTConfig(rc, f.rate)
	default:
		rc.QPS, rc.Burst = clientQPS, clientBurst
	}
	b, err := kubernetes.NewForConfig(rc, kubernetes.WithPolicy(p))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// restConfigFromKubeconfig parses a kubeconfig from a Secret. It refuses
// credential plugins and file references before anything acts on them: the
// provider would run the plugin, or read the file (its own service account
// token, say) and send it to whatever server the kubeconfig names.
func restConfigFromKubeconfig(kc []byte, secret, key string) (*rest.Config, error) {
	c, err := clientcmd.Load(kc)
	if err != nil {
		return nil, backend.Permanent(errors.Wrapf(err, errFmtParseKubeconfig, secret, key))
	}
	if what := unsafeKubeconfig(c); what != "" {
		return nil, backend.Permanent(errors.Errorf(errFmtUnsafeKubecfg, secret, key, what))
	}
	rc, err := clientcmd.NewDefaultClientConfig(*c, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, backend.Permanent(errors.Wrapf(err, errFmtParseKubeconfig, secret, key))
	}
	return rc, nil
}

// unsafeKubeconfig names the first thing in c that makes the provider run a
// program or read a local file, or returns "".
func unsafeKubeconfig(c *clientcmdapi.Config) string {
	for _, a := range c.AuthInfos {
		switch {
		case a.Exec != nil:
			return "an exec credential plugin"
		case a.AuthProvider != nil:
			return "an auth provider plugin"
		case a.TokenFile != "":
			return "a token file"
		case a.ClientCertificate != "" || a.ClientKey != "":
			return "a client certificate file"
		}
	}
	for _, cl := range c.Clusters {
		if cl.CertificateAuthority != "" {
			return "a certificate authority file"
		}
	}
	return ""
}
