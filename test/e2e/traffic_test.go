/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL reads best dot-imported.
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers too.
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
	"github.com/egressproxy/provider-egressproxy/internal/testenv/traffic"
)

// A trafficCase lets the shared specs send real requests through a
// backend's proxy: from a client inside the backend's own network namespace
// (the libvirt sandbox's, the real node's) to an origin on that namespace's
// own addresses (package traffic), never any other address. A backend
// without one (gcp, for now) skips the traffic specs.
type trafficCase struct {
	// unavailable says why no traffic can flow here, or "".
	unavailable func() string
	// netns is the path of the namespace the client and the origin use.
	netns func() string
	// clientCIDR holds the address the namespace's client connects from.
	clientCIDR func() string
	// privateOrigin is a private address of the namespace: the origin
	// listens there too, and the claim allows it, to see squid refuse it.
	privateOrigin func() string
	// composition sets up the Composition the claim selects and returns
	// its labels; nil selects the backend's own.
	composition func(ctx context.Context) map[string]string
	// resolve maps the Secret's endpoint onto an address to dial, for
	// names no DNS in the namespace knows; nil dials the endpoint.
	resolve func(ctx context.Context, hostport string) (string, error)
	// readyTimeout bounds a (re)start of the proxy until it serves.
	readyTimeout time.Duration
}

// Credentials of the traffic claims: a credentialsSecretRef Secret, so that
// a spec can rotate the password.
const (
	trafficUser      = "e2e"
	trafficPassword  = "first-password-for-e2e"
	rotatedPassword  = "rotated-password-for-e2e"
	trafficCredsName = "-credentials"
)

// trafficRun is the traffic state of one backend's ordered specs.
type trafficRun struct {
	tc     *trafficCase
	origin *traffic.Origin
	// secret is the claim's connection Secret name.
	secret string
}

// setUpTraffic turns the backend's claim into one whose traffic the specs
// can check, starts the origin, and creates the credentials Secret. It
// returns nil when the backend has no traffic case or none can run here.
func setUpTraffic(ctx context.Context, bc backendCase, claim *unstructured.Unstructured) *trafficRun {
	tc := bc.traffic
	if tc == nil || tc.unavailable() != "" {
		return nil
	}
	o, err := traffic.StartOrigin(tc.netns(), traffic.AllowedOrigin, traffic.OtherOrigin, traffic.StableOrigin, tc.privateOrigin())
	Expect(err).NotTo(HaveOccurred(), "starting the origin in the backend's network namespace")
	DeferCleanup(o.Close)
	if tc.composition != nil {
		sel := map[string]any{}
		for k, v := range tc.composition(ctx) {
			sel[k] = v
		}
		Expect(unstructured.SetNestedMap(claim.Object, sel, "spec", "compositionSelector", "matchLabels")).To(Succeed())
	}
	spec := map[string]any{
		"allowedClientCIDRs":   []any{tc.clientCIDR()},
		"allowedDestinations":  []any{traffic.AllowedOrigin + "/32", traffic.StableOrigin + "/32", tc.privateOrigin() + "/32"},
		"credentialsSecretRef": map[string]any{"name": claim.GetName() + trafficCredsName},
	}
	for k, v := range spec {
		Expect(unstructured.SetNestedField(claim.Object, v, "spec", k)).To(Succeed())
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.GetNamespace(), Name: claim.GetName() + trafficCredsName},
		StringData: map[string]string{"username": trafficUser, "password": trafficPassword},
	}
	Expect(client.IgnoreAlreadyExists(env.c.Client.Create(ctx, s))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(env.c.Client.Delete(ctx, s))).To(Succeed()) })
	return &trafficRun{tc: tc, origin: o, secret: str(claim, "spec", "writeConnectionSecretToRef", "name")}
}

// trafficOrSkip skips a traffic spec where no traffic can flow, and fails it
// when CI=true and only this machine is to blame.
func (r *backendRun) trafficOrSkip() {
	r.afterReady()
	tc := r.bc.traffic
	if tc == nil {
		Skip(fmt.Sprintf("no traffic case for the %s backend yet", r.bc.backend))
	}
	if why := tc.unavailable(); why != "" {
		if testenv.InCI() {
			Fail("CI=true but no traffic can flow through the proxy here: " + why)
		}
		Skip(why + " (CI=true turns this into a failure)")
	}
}

// client returns a traffic client through the proxy of the claim's
// connection Secret, with the Secret's credentials, read anew: a replaced
// VM may have a new address.
func (r *backendRun) client(ctx context.Context, g Gomega) traffic.Client {
	u, err := url.Parse(string(getSecret(ctx, g, r.ns, r.traffic.secret).Data["url"]))
	g.Expect(err).NotTo(HaveOccurred())
	return traffic.Client{NetNS: r.traffic.tc.netns(), Proxy: u, Resolve: r.traffic.tc.resolve, Roots: r.traffic.origin.Roots}
}

// as returns a client maker for expectAnswers with other credentials.
func (r *backendRun) as(user *url.Userinfo) func(context.Context, Gomega) traffic.Client {
	return func(ctx context.Context, g Gomega) traffic.Client { return r.client(ctx, g).As(user) }
}

// A request a traffic spec sends, and the answer it wants.
type request struct {
	what string
	send func(ctx context.Context, c traffic.Client) (traffic.Result, error)
	want int
}

func httpGet(target string) func(context.Context, traffic.Client) (traffic.Result, error) {
	return func(ctx context.Context, c traffic.Client) (traffic.Result, error) { return c.Get(ctx, target) }
}

func connect(hostport string) func(context.Context, traffic.Client) (traffic.Result, error) {
	return func(ctx context.Context, c traffic.Client) (traffic.Result, error) { return c.Connect(ctx, hostport) }
}

// expectAnswers sends each request through a client mk makes until it gets
// its answer (the proxy may still be restarting), within timeout.
func expectAnswers(ctx context.Context, mk func(context.Context, Gomega) traffic.Client, timeout time.Duration, reqs ...request) {
	for _, rq := range reqs {
		Eventually(ctx, func(g Gomega) {
			res, err := rq.send(ctx, mk(ctx, g))
			g.Expect(err).NotTo(HaveOccurred(), rq.what)
			g.Expect(res.Code).To(Equal(rq.want), "%s: got %s", rq.what, res)
			if rq.want == http.StatusOK {
				g.Expect(res.Body).To(Equal(traffic.Body), "%s: the origin answers", rq.what)
			}
		}).WithTimeout(timeout).WithPolling(2*time.Second).Should(Succeed(), rq.what)
	}
}

// servesTraffic checks the proxy's policy with real requests.
func (r *backendRun) servesTraffic(ctx SpecContext) {
	r.trafficOrSkip()
	c := r.client(ctx, Default)
	pw, _ := c.Proxy.User.Password()
	Expect(c.Proxy.User.Username()).To(Equal(trafficUser))
	Expect(pw).To(Equal(trafficPassword), "the connection Secret has the credentials Secret's password")
	private := r.traffic.tc.privateOrigin()
	timed(string(r.bc.backend)+": Ready -> first proxied 200", func() {
		expectAnswers(ctx, r.client, r.traffic.tc.readyTimeout, request{"GET an allowed host over HTTP", httpGet("http://" + traffic.AllowedOrigin + "/"), http.StatusOK})
	})
	expectAnswers(ctx, r.client, time.Minute,
		request{"CONNECT to an allowed host, then GET over TLS", connect(traffic.AllowedOrigin + ":443"), http.StatusOK},
		request{"GET a host not allowed", httpGet("http://" + traffic.OtherOrigin + "/"), http.StatusForbidden},
		request{"CONNECT to a host not allowed", connect(traffic.OtherOrigin + ":443"), http.StatusForbidden},
		request{"GET without credentials", func(ctx context.Context, c traffic.Client) (traffic.Result, error) {
			return c.As(nil).Get(ctx, "http://"+traffic.AllowedOrigin+"/")
		}, http.StatusProxyAuthRequired},
		request{"GET with a wrong password", func(ctx context.Context, c traffic.Client) (traffic.Result, error) {
			return c.As(url.UserPassword(trafficUser, "wrong-password")).Get(ctx, "http://"+traffic.AllowedOrigin+"/")
		}, http.StatusProxyAuthRequired},
		request{"GET from a client outside allowedClientCIDRs", func(ctx context.Context, c traffic.Client) (traffic.Result, error) {
			return c.From(traffic.OutsideClient).Get(ctx, "http://"+traffic.AllowedOrigin+"/")
		}, http.StatusForbidden},
		request{"GET an allowed private destination (denyPrivateDestinations)", httpGet("http://" + private + "/"), http.StatusForbidden},
	)
}

// servesChangedAllowlist checks the allowlist changesAllowlist made: the
// new host works and the removed one is refused.
func (r *backendRun) servesChangedAllowlist(ctx SpecContext) {
	r.trafficOrSkip()
	// The password was rotated too: whichever the Secret has yet.
	c := r.as(url.UserPassword(trafficUser, rotatedPassword))
	timed(string(r.bc.backend)+": allowlist change -> new host served", func() {
		expectAnswers(ctx, c, r.traffic.tc.readyTimeout,
			request{"GET the newly allowed host", httpGet("http://" + traffic.OtherOrigin + "/"), http.StatusOK},
			request{"GET the host no longer allowed", httpGet("http://" + traffic.AllowedOrigin + "/"), http.StatusForbidden},
			request{"CONNECT to the host no longer allowed", connect(traffic.AllowedOrigin + ":443"), http.StatusForbidden},
		)
	})
}

// rotatePassword rotates the password in the claim's credentials Secret.
// changesAllowlist does it with the allowlist change: a KVM proxy boots a
// new guest for each change, and one boot for both keeps the suite short.
func (r *backendRun) rotatePassword(ctx context.Context) {
	s := &corev1.Secret{}
	Expect(env.c.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name + trafficCredsName}, s)).To(Succeed())
	p := client.MergeFrom(s.DeepCopy())
	s.Data["password"] = []byte(rotatedPassword)
	Expect(env.c.Client.Patch(ctx, s, p)).To(Succeed())
}

// servesRotatedPassword checks the password changesAllowlist rotated: the
// new one works and the old one stops.
func (r *backendRun) servesRotatedPassword(ctx SpecContext) {
	r.trafficOrSkip()
	target := "http://" + traffic.OtherOrigin + "/"
	timed(string(r.bc.backend)+": rotated password served", func() {
		expectAnswers(ctx, r.as(url.UserPassword(trafficUser, rotatedPassword)), r.traffic.tc.readyTimeout,
			request{"GET with the rotated password", httpGet(target), http.StatusOK})
		expectAnswers(ctx, r.as(url.UserPassword(trafficUser, trafficPassword)), time.Minute,
			request{"GET with the old password", httpGet(target), http.StatusProxyAuthRequired})
	})
	Eventually(ctx, func(g Gomega) {
		u, _ := url.Parse(string(getSecret(ctx, g, r.ns, r.traffic.secret).Data["url"]))
		pw, _ := u.User.Password()
		g.Expect(pw).To(Equal(rotatedPassword), "the connection Secret has the rotated password")
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
}

func getSecret(ctx context.Context, g Gomega, ns, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.ExpectWithOffset(1, env.c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}
