/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

// Command provider runs the egress proxy Crossplane provider.
package main

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/egressproxy/provider-egressproxy/internal/backend"
	"github.com/egressproxy/provider-egressproxy/internal/backend/registry"
	controllers "github.com/egressproxy/provider-egressproxy/internal/controller"
	"github.com/egressproxy/provider-egressproxy/internal/controller/proxy"
	"github.com/egressproxy/provider-egressproxy/internal/version"
	"github.com/egressproxy/provider-egressproxy/internal/watchconn"
)

func main() {
	var (
		app              = kingpin.New(filepath.Base(os.Args[0]), "Egress proxies as Crossplane managed resources, one kind per backend.").DefaultEnvars()
		debug            = app.Flag("debug", "Run with debug logging.").Short('d').Bool()
		leaderElection   = app.Flag("leader-election", "Use leader election for the controller manager.").Short('l').Default("false").Envar("LEADER_ELECTION").Bool()
		syncInterval     = app.Flag("sync", "How often all resources are checked for drift from the desired state.").Short('s').Default("1h").Duration()
		pollInterval     = app.Flag("poll", "How often each resource is checked for drift from the desired state.").Default("1m").Duration()
		pollWatched      = app.Flag("poll-watched", "How often resources whose backend watches its instances are checked for drift; changes in between arrive through the watch. 0: --poll.").Default("10m").Duration()
		trafficInterval  = app.Flag("traffic-interval", "The longest a watched resource goes without a poll, so its traffic metrics stay this fresh: a watch reports no traffic. 0: --poll-watched alone.").Default("1m").Duration()
		pollJitter       = app.Flag("poll-jitter", "Moves each poll up to this much earlier or later, at most a tenth of the poll interval.").Default("1m").Duration()
		pollStateMetric  = app.Flag("poll-state-metric", "How often the state metrics are recorded.").Default("5s").Duration()
		maxReconcileRate = app.Flag("max-reconcile-rate", "The most reconciles per second, and the concurrent reconciles of each managed resource controller (config controllers keep at most 5).").Default("10").Int()
		timeout          = app.Flag("timeout", "The longest one reconcile, and every backend call in it, may take.").Default("1m").Duration()
		mgmtPolicies     = app.Flag("enable-management-policies", "Enable support for management policies.").Default("true").Envar("ENABLE_MANAGEMENT_POLICIES").Bool()
		gcInterval       = app.Flag("gc-interval", "How often instances whose managed resource is gone are deleted; 0 turns it off.").Default("10m").Duration()
		gcMinAge         = app.Flag("gc-min-age", "How old an orphan instance must be before it is deleted.").Default("1h").Duration()
		healthInterval   = app.Flag("health-interval", "How often the backend of every provider config is checked (Healthy condition); 0 turns it off.").Default("1m").Duration()
		instance         = app.Flag(flagInstance, "Name of this installation in the ownership labels, so installations sharing a backend never touch each other's instances. Empty: provider-egressproxy-<hash of the key in the Secret "+credentialsKeySecret+" of --namespace>, unique per installation. An explicit value must be a canonical label value (lower case, digits, '-', '_', at most 63).").Default("").String()
		metricsAddr      = app.Flag("metrics-bind-address", "Address the Prometheus metrics are served on.").Default(":8080").String()
		healthAddr       = app.Flag("health-probe-bind-address", "Address the health probes are served on.").Default(":8081").String()
		normalEvents     = app.Flag("normal-events", "Record Normal events of managed resources (creation, update, deletion requested); --no-normal-events saves one write per new proxy at scale (the Synced and Ready conditions tell the same), and warnings are always recorded.").Default("true").Bool()
		namespace        = app.Flag("namespace", "The provider's own namespace, where it keeps the key of generated proxy passwords (the Secret "+credentialsKeySecret+"). Crossplane's package runtime sets POD_NAMESPACE.").Default("crossplane-system").Envar("POD_NAMESPACE").String()
		pprofAddr        = app.Flag("pprof-bind-address", "Address Go's pprof profiles are served on (make bench); empty turns them off.").Default("").String()
	)
	// Each backend declares its own flags.
	wire := controllers.Wire(app, backends)
	kingpin.MustParse(app.Parse(os.Args[1:]))
	// Before anything else: a bad value must fail without an API server.
	kingpin.FatalIfError(checkInstanceFlag(*instance), "Invalid flag")

	// Milliseconds: a reconcile's steps are apart by less than a second.
	zl := zap.New(zap.UseDevMode(*debug), func(o *zap.Options) { o.TimeEncoder = zapcore.ISO8601TimeEncoder })
	log := logging.NewLogrLogger(zl.WithName("provider-egressproxy"))
	ctrl.SetLogger(zl)
	log.Info("Starting", "version", version.Version, "sync-interval", syncInterval.String(), "poll-interval", pollInterval.String())

	// Off unless OTEL_EXPORTER_OTLP_*ENDPOINT is set: see docs/platform.md.
	stopTracing, err := setupTracing(context.Background(), version.Version)
	kingpin.FatalIfError(err, "Cannot set up tracing")

	cfg, err := ctrl.GetConfig()
	kingpin.FatalIfError(err, "Cannot get API server rest config")
	// Each distinct warning once: the API server warns about
	// crossplane-runtime's finalizer name on every write of a managed
	// resource.
	cfg.WarningHandlerWithContext = ctrllog.NewKubeAPIWarningLogger(ctrllog.KubeAPIWarningLoggerOptions{Deduplicate: true})

	// One client for the provider's own reads before the manager starts.
	core, err := corev1client.NewForConfig(cfg)
	kingpin.FatalIfError(err, "Cannot create the API server client")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	key, err := credentialsKey(ctx, core, *namespace)
	cancel()
	kingpin.FatalIfError(err, "Cannot get the key of generated proxy passwords")
	id, err := providerInstance(*instance, key)
	kingpin.FatalIfError(err, "Cannot determine the provider instance")
	log.Info("Provider instance", "provider-instance", id, "explicit", *instance != "")

	// The scheme is complete before the manager is made: its cache options
	// name the CRD type, which the manager resolves at construction.
	scheme := runtime.NewScheme()
	kingpin.FatalIfError(clientgoscheme.AddToScheme(scheme), "Cannot add the core APIs to scheme")
	kingpin.FatalIfError(registry.AddToScheme(scheme), "Cannot add the provider's APIs to scheme")
	kingpin.FatalIfError(apiextensionsv1.AddToScheme(scheme), "Cannot add CustomResourceDefinitions to scheme")

	leaseDuration, renewDeadline := 60*time.Second, 50*time.Second
	cacheOpts, err := cacheOptions(syncInterval)
	kingpin.FatalIfError(err, "Cannot set up the cache")
	mcfg := ratelimiter.LimitRESTConfig(cfg, *maxReconcileRate)
	// The cache's lists and watches on a connection of their own.
	cacheOpts.HTTPClient, err = watchconn.NewHTTPClient(mcfg)
	kingpin.FatalIfError(err, "Cannot set up the cache's connection")
	mgr, err := ctrl.NewManager(mcfg, ctrl.Options{
		Scheme:                     scheme,
		Cache:                      cacheOpts,
		LeaderElection:             *leaderElection,
		LeaderElectionID:           "crossplane-leader-election-provider-egressproxy",
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &leaseDuration,
		RenewDeadline:              &renewDeadline,
		// A replica that stops (its pod deleted, a roll) hands the Lease
		// over as it exits, after its controllers have stopped, so the
		// other takes over within seconds, not a lease time. Safe: main
		// returns once the manager has stopped (only traces are flushed).
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:        *healthAddr,
		PprofBindAddress:              *pprofAddr,
	})
	kingpin.FatalIfError(err, "Cannot create controller manager")
	kingpin.FatalIfError(mgr.AddHealthzCheck("ping", healthz.Ping), "Cannot add the health check")
	kingpin.FatalIfError(mgr.AddReadyzCheck("ping", healthz.Ping), "Cannot add the ready check")

	mrMetrics := managed.NewMRMetricRecorder()
	stateMetrics := statemetrics.NewMRStateMetrics()
	backendMetrics := backend.NewMetrics()
	trafficMetrics := proxy.NewTrafficMetrics()
	metrics.Registry.MustRegister(mrMetrics, stateMetrics, backendMetrics, trafficMetrics, instanceInfo(id))

	gctx, cancel := context.WithTimeout(context.Background(), *timeout)
	safeStart, err := crdGate(gctx, cfg, log)
	cancel()
	kingpin.FatalIfError(err, "Cannot set up safe-start")
	o := controller.Options{
		Logger:                  log,
		MaxConcurrentReconciles: *maxReconcileRate,
		PollInterval:            *pollInterval,
		GlobalRateLimiter:       ratelimiter.NewGlobal(*maxReconcileRate),
		Features:                &feature.Flags{},
		// safe-start: a platform team may activate only the backends it
		// uses.
		Gate: safeStart,
		MetricOptions: &controller.MetricOptions{
			PollStateMetricInterval: *pollStateMetric,
			MRMetrics:               mrMetrics,
			MRStateMetrics:          stateMetrics,
		},
	}
	if *mgmtPolicies {
		o.Features.Enable(feature.EnableBetaManagementPolicies)
	}

	kingpin.FatalIfError(controllers.Setup(mgr, proxy.Options{
		Options:          o,
		ProviderInstance: id,
		CredentialsKey:   key,
		Timeout:          *timeout,
		GCInterval:       *gcInterval,
		GCMinAge:         *gcMinAge,
		HealthInterval:   *healthInterval,
		// Not in controller.Options: crossplane-runtime has no such fields.
		WatchedPollInterval: *pollWatched,
		TrafficInterval:     *trafficInterval,
		PollJitter:          *pollJitter,
		NormalEvents:        *normalEvents,
		// The tracer is the global one: a no-op unless setupTracing
		// configured an exporting SDK.
		Instrumentation: backend.NewInstrumentation(backend.WithMetrics(backendMetrics), backend.WithTracer(otel.Tracer("provider-egressproxy"))),
		Traffic:         trafficMetrics,
	}, wire(proxy.Env{Self: cfg, CallTimeout: *timeout / 2, ReconcileRate: *maxReconcileRate})), "Cannot set up the provider's controllers")
	err = mgr.Start(ctrl.SetupSignalHandler())
	// Send the spans still buffered before exiting.
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if serr := stopTracing(flush); serr != nil {
		log.Info("Cannot flush traces", "error", serr)
	}
	cancel()
	kingpin.FatalIfError(err, "Cannot start controller manager")
}
