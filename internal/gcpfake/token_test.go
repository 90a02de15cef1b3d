package gcpfake

import (
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
)

func TestServiceAccountKeyThroughTokenEndpoint(t *testing.T) {
	s := NewTestServer(t, WithRequireAuth())
	ctx := ctxT(t)
	get := func(c *clients) error {
		_, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "vm"})
		return err
	}

	anon := newClients(t, s.ClientOptions()...)
	if err := get(anon); codeOf(err) != http.StatusUnauthorized {
		t.Errorf("call without a token: %v, want 401", err)
	}

	key, err := s.NewServiceAccountKey("provider@my-project.iam.gserviceaccount.com")
	if err != nil {
		t.Fatalf("NewServiceAccountKey: %v", err)
	}
	if !strings.Contains(string(key), `"token_uri": "`+s.URL()+`/token"`) || !strings.Contains(string(key), `"type": "service_account"`) {
		t.Errorf("key does not point at the fake:\n%s", key)
	}
	authed := newClients(t, option.WithEndpoint(s.URL()), option.WithAuthCredentialsJSON(option.ServiceAccount, key))
	if err := get(authed); reasonOf(err) != ReasonNotFound {
		t.Errorf("call with a service-account key: %v, want it to get through to a 404", err)
	}
	if s.TokensIssued() < 1 || s.Calls(CallToken) < 1 {
		t.Errorf("token endpoint issued %d tokens in %d calls, want at least one", s.TokensIssued(), s.Calls(CallToken))
	}

	// A key the fake did not generate is refused at the token endpoint.
	other := NewTestServer(t)
	foreign, err := other.NewServiceAccountKey("")
	if err != nil {
		t.Fatalf("NewServiceAccountKey: %v", err)
	}
	foreign = []byte(strings.ReplaceAll(string(foreign), other.URL(), s.URL()))
	bad := newClients(t, option.WithEndpoint(s.URL()), option.WithAuthCredentialsJSON(option.ServiceAccount, foreign))
	if err := get(bad); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("call with an unknown key: %v, want invalid_grant", err)
	}

	s.AddAccessToken("static-token")
	static := newClients(t, option.WithEndpoint(s.URL()), option.WithHTTPClient(&http.Client{Transport: bearer("static-token")}))
	if err := get(static); reasonOf(err) != ReasonNotFound {
		t.Errorf("call with an added access token: %v, want a 404", err)
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
