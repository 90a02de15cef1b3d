package gcpfake

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/protobuf/proto"
)

// reasonOf returns errors[0].reason of a GCE error. Callers must use
// errors.As: the client returns an *apierror.APIError wrapping the
// *googleapi.Error, so a type assertion fails.
func reasonOf(err error) string {
	var g *googleapi.Error
	if !errors.As(err, &g) || len(g.Errors) == 0 {
		return ""
	}
	return g.Errors[0].Reason
}

func TestErrorEnvelopes(t *testing.T) {
	type want struct {
		code   int
		reason string
		msg    string
	}
	cases := map[string]struct {
		reason string
		call   func(context.Context, *clients) error
		want   want
	}{
		"NotFound": {
			reason: "Getting a missing instance is 404 notFound.",
			call: func(ctx context.Context, c *clients) error {
				_, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: "missing"})
				return err
			},
			want: want{404, ReasonNotFound, "The resource 'projects/test-project/zones/us-central1-a/instances/missing' was not found"},
		},
		"AlreadyExists": {
			reason: "Inserting an existing name is 409 alreadyExists.",
			call: func(ctx context.Context, c *clients) error {
				_, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, InstanceResource: instance("taken")})
				return err
			},
			want: want{409, ReasonAlreadyExists, "The resource 'projects/test-project/zones/us-central1-a/instances/taken' already exists"},
		},
		"InvalidName": {
			reason: "A name that is not RFC 1035 is 400 invalid.",
			call: func(ctx context.Context, c *clients) error {
				_, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, InstanceResource: instance("Bad_Name")})
				return err
			},
			want: want{400, ReasonInvalid, "Invalid value for field 'resource.name': 'Bad_Name'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"},
		},
		"MissingMachineType": {
			reason: "A missing required field is 400 required.",
			call: func(ctx context.Context, c *clients) error {
				in := instance("vm")
				in.MachineType = nil
				_, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, InstanceResource: in})
				return err
			},
			want: want{400, ReasonRequired, "Required field 'resource.machineType' not specified"},
		},
		"BareMachineType": {
			reason: "GCE wants zones/<z>/machineTypes/<t>, not a bare name.",
			call: func(ctx context.Context, c *clients) error {
				in := instance("vm")
				in.MachineType = proto.String("e2-small")
				_, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone, InstanceResource: in})
				return err
			},
			want: want{400, ReasonInvalid, "Invalid value for field 'resource.machineType': 'e2-small'. The URL is malformed."},
		},
		"BadLabel": {
			reason: "Label values must be lowercase.",
			call: func(ctx context.Context, c *clients) error {
				_, err := c.inst.Insert(ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone,
					InstanceResource: instance("vm", withLabels(map[string]string{"team": "Platform"}))})
				return err
			},
			want: want{400, ReasonInvalid, "Invalid value for field 'resource.labels.team': 'Platform'. Label values may contain only lowercase letters, digits, '_' and '-' (at most 63 characters)."},
		},
		"UnknownZone": {
			reason: "A zone that does not exist is 404.",
			call: func(ctx context.Context, c *clients) error {
				_, err := c.inst.Get(ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: "mars-north1-a", Instance: "vm"})
				return err
			},
			want: want{404, ReasonNotFound, "The resource 'projects/test-project/zones/mars-north1-a' was not found"},
		},
	}
	s, c := setup(t)
	ctx := ctxT(t)
	mustWait(ctx, t, insertInstance(ctx, t, c, testZone, instance("taken")))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.call(ctx, c)
			var ae *apierror.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("%s\nerror %T %v is not an *apierror.APIError", tc.reason, err, err)
			}
			var g *googleapi.Error
			if !errors.As(err, &g) {
				t.Fatalf("%s\nerror %v does not wrap a *googleapi.Error", tc.reason, err)
			}
			got := want{code: g.Code, msg: g.Message}
			if len(g.Errors) == 1 {
				got.reason = g.Errors[0].Reason
				if g.Errors[0].Message != g.Message {
					t.Errorf("%s\nerrors[0].message %q != message %q", tc.reason, g.Errors[0].Message, g.Message)
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			if ae.HTTPCode() != tc.want.code {
				t.Errorf("%s\nHTTPCode() = %d, want %d", tc.reason, ae.HTTPCode(), tc.want.code)
			}
		})
	}
	if n := len(s.Instances()); n != 1 {
		t.Errorf("failed inserts created instances: have %d, want 1", n)
	}
}
