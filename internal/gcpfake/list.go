package gcpfake

import (
	"encoding/base64"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	maxPage      = 500 // GCE's default and largest maxResults
	maxBodyBytes = 4 << 20
	tokenPrefix  = "gcpfake-offset-"
)

type listQuery struct {
	filter filterExpr // nil matches everything
	raw    string
	max    int
	offset int
}

func parseListQuery(r *http.Request) (listQuery, *apiError) {
	v := r.URL.Query()
	q := listQuery{raw: v.Get("filter"), max: maxPage}
	f, err := parseFilter(q.raw)
	if err != nil {
		return q, errInvalid("filter", q.raw, "Invalid list filter expression: "+err.Error())
	}
	q.filter = f
	if m := v.Get("maxResults"); m != "" {
		n, err := strconv.Atoi(m)
		switch {
		case err != nil || n < 0:
			return q, errInvalid("maxResults", m, "Must be a non-negative integer.")
		case n > maxPage:
			return q, errInvalid("maxResults", m, "Must be less than or equal to 500")
		case n > 0:
			q.max = n
		}
	}
	if t := v.Get("pageToken"); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		n, aerr := strconv.Atoi(strings.TrimPrefix(string(b), tokenPrefix))
		if err != nil || aerr != nil || !strings.HasPrefix(string(b), tokenPrefix) || n < 0 {
			return q, errInvalid("pageToken", t, "Invalid page token.")
		}
		q.offset = n
	}
	return q, nil
}

// filterAndPage applies the filter, then cuts the page the query asks for.
// It returns the page and the token of the next one ("" on the last page).
func filterAndPage[T proto.Message](items []T, q listQuery) ([]T, string, *apiError) {
	var matched []T
	for _, it := range items {
		ok, err := matches(q.filter, it)
		if err != nil {
			return nil, "", errInvalid("filter", q.raw, "Invalid list filter expression: "+err.Error())
		}
		if ok {
			matched = append(matched, it)
		}
	}
	if q.offset > len(matched) {
		q.offset = len(matched)
	}
	end := min(q.offset+q.max, len(matched))
	next := ""
	if end < len(matched) {
		next = base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + strconv.Itoa(end)))
	}
	return matched[q.offset:end], next, nil
}

func (s *Server) aggregatedInstances(r *http.Request) (proto.Message, error) {
	project := r.PathValue("project")
	if e := s.checkProject(project); e != nil {
		return nil, e
	}
	q, e := parseListQuery(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	all := s.instancesIn(project, func(key) bool { return true })
	s.mu.Unlock()
	page, next, e := filterAndPage(all, q)
	if e != nil {
		return nil, e
	}
	items := map[string]*computepb.InstancesScopedList{}
	for _, z := range s.cfg.zones {
		items["zones/"+z] = &computepb.InstancesScopedList{}
	}
	for _, inst := range page {
		scope := "zones/" + lastSegment(inst.GetZone())
		items[scope].Instances = append(items[scope].Instances, inst)
	}
	for scope, l := range items {
		if len(l.Instances) == 0 {
			l.Warning = noResults(scope)
		}
	}
	return &computepb.InstanceAggregatedList{
		Kind:          proto.String("compute#instanceAggregatedList"),
		Id:            proto.String("projects/" + project + "/aggregated/instances"),
		Items:         items,
		SelfLink:      proto.String(scopeLink(project, "aggregated/instances")),
		NextPageToken: optional(next),
	}, nil
}

// noResults is the warning GCE puts on every scope of an aggregated list that
// has nothing on this page.
func noResults(scope string) *computepb.Warning {
	return &computepb.Warning{
		Code:    proto.String("NO_RESULTS_ON_PAGE"),
		Message: proto.String("There are no results for scope '" + scope + "' on this page."),
		Data:    []*computepb.Data{{Key: proto.String("scope"), Value: proto.String(scope)}},
	}
}

// readBody decodes a request body strictly: like GCE, unknown fields are a
// 400, not silently dropped.
func readBody(r *http.Request, m proto.Message) *apiError {
	_, e := readBodyRaw(r, m)
	return e
}

// readBodyRaw is readBody that also returns the raw body.
func readBodyRaw(r *http.Request, m proto.Message) ([]byte, *apiError) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return nil, &apiError{Code: http.StatusBadRequest, Reason: ReasonInvalid, Message: "Cannot read the request body."}
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, errRequired("resource")
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, &apiError{Code: http.StatusBadRequest, Reason: ReasonInvalid,
			Message: "Invalid JSON payload received. " + err.Error()}
	}
	return b, nil
}

// opOrError turns the result of replay into a handler result.
func opOrError(op *computepb.Operation, e *apiError) (proto.Message, error) {
	if e != nil {
		return nil, e
	}
	return op, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return proto.String(s)
}

func sortKeys(keys []key) {
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.project != b.project {
			return a.project < b.project
		}
		if a.scope != b.scope {
			return a.scope < b.scope
		}
		return a.name < b.name
	})
}
