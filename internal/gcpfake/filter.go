package gcpfake

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	errFmtUnexpected = "unexpected %q at offset %d"
	errFmtExpected   = "expected %s at offset %d"
	errUnterminated  = "unterminated string"
	errFmtRegexp     = "bad regular expression %q"
	errEncode        = "cannot encode the resource"
)

// A filterExpr is a parsed GCE list filter. It is evaluated against the
// resource's JSON form, so any field path works: labels.env, name, status,
// scheduling.automaticRestart, tags.items.
//
// Supported: `field = value`, `field != value`, `field : value` (substring),
// `field:*` (present), the older `field eq regexp` / `field ne regexp`,
// parentheses, NOT, and AND / OR, with juxtaposed terms ANDed as GCE does.
type filterExpr interface {
	eval(doc any) bool
}

type andExpr struct{ l, r filterExpr }
type orExpr struct{ l, r filterExpr }
type notExpr struct{ e filterExpr }

type cmpExpr struct {
	path []string
	op   string // "=", "!=", ":", "eq", "ne"
	val  string
	re   *regexp.Regexp
}

func (e andExpr) eval(d any) bool { return e.l.eval(d) && e.r.eval(d) }
func (e orExpr) eval(d any) bool  { return e.l.eval(d) || e.r.eval(d) }
func (e notExpr) eval(d any) bool { return !e.e.eval(d) }

func (e cmpExpr) eval(d any) bool {
	vals := lookup(d, e.path)
	anyOf := func(f func(string) bool) bool {
		for _, v := range vals {
			if v != nil && f(scalar(v)) {
				return true
			}
		}
		return false
	}
	switch e.op {
	case "=":
		return anyOf(func(s string) bool { return s == e.val })
	case "!=":
		return !anyOf(func(s string) bool { return s == e.val })
	case ":":
		if e.val == "*" {
			return anyOf(func(string) bool { return true })
		}
		return anyOf(func(s string) bool { return strings.Contains(s, e.val) })
	case "eq":
		return anyOf(e.re.MatchString)
	default: // "ne"
		return !anyOf(e.re.MatchString)
	}
}

// lookup walks a dotted path through JSON, fanning out over arrays.
func lookup(d any, path []string) []any {
	cur := []any{d}
	for _, seg := range path {
		var next []any
		for _, c := range cur {
			if m, ok := c.(map[string]any); ok {
				if v, ok := m[seg]; ok {
					next = append(next, v)
				}
			}
		}
		cur = flatten(next)
	}
	return cur
}

func flatten(vs []any) []any {
	var out []any
	for _, v := range vs {
		if a, ok := v.([]any); ok {
			out = append(out, a...)
			continue
		}
		out = append(out, v)
	}
	return out
}

func scalar(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}

// matches reports whether m passes f; a nil filter passes everything.
func matches(f filterExpr, m proto.Message) (bool, error) {
	if f == nil {
		return true, nil
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return false, errors.Wrap(err, errEncode)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return false, errors.Wrap(err, errEncode)
	}
	return f.eval(doc), nil
}

type token struct {
	kind byte // '(' ')' 'o' (operator) 'w' (word) 's' (quoted string)
	text string
	pos  int
}

func tokenize(in string) ([]token, error) {
	var out []token
	for i := 0; i < len(in); {
		c := in[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')':
			out = append(out, token{kind: c, text: string(c), pos: i})
			i++
		case c == '!' && i+1 < len(in) && in[i+1] == '=':
			out = append(out, token{kind: 'o', text: "!=", pos: i})
			i += 2
		case c == '=' || c == ':':
			out = append(out, token{kind: 'o', text: string(c), pos: i})
			i++
		case c == '"' || c == '\'':
			s, n, err := unquote(in[i:])
			if err != nil {
				return nil, err
			}
			out = append(out, token{kind: 's', text: s, pos: i})
			i += n
		default:
			j := i
			for j < len(in) && !strings.ContainsRune(" \t\n()=:!\"'", rune(in[j])) {
				j++
			}
			if j == i {
				return nil, errors.Errorf(errFmtUnexpected, string(c), i)
			}
			out = append(out, token{kind: 'w', text: in[i:j], pos: i})
			i = j
		}
	}
	return out, nil
}

// unquote reads a quoted string with backslash escapes from the start of s
// and returns it and how many bytes it took.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case q:
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, errors.New(errUnterminated)
}
