package gcpfake

import (
	"regexp"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// parseFilter parses a GCE list filter. An empty filter yields nil.
func parseFilter(in string) (filterExpr, error) {
	toks, err := tokenize(in)
	if err != nil || len(toks) == 0 {
		return nil, err
	}
	p := &parser{toks: toks, end: len(in)}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if t, ok := p.peek(); ok {
		return nil, errors.Errorf(errFmtUnexpected, t.text, t.pos)
	}
	return e, nil
}

type parser struct {
	toks []token
	i    int
	end  int
}

func (p *parser) peek() (token, bool) {
	if p.i >= len(p.toks) {
		return token{pos: p.end}, false
	}
	return p.toks[p.i], true
}

func (p *parser) next() (token, bool) {
	t, ok := p.peek()
	if ok {
		p.i++
	}
	return t, ok
}

func (p *parser) keyword(w string) bool {
	t, ok := p.peek()
	return ok && t.kind == 'w' && t.text == w
}

func (p *parser) or() (filterExpr, error) {
	l, err := p.and()
	for err == nil && p.keyword("OR") {
		p.i++
		var r filterExpr
		if r, err = p.and(); err == nil {
			l = orExpr{l, r}
		}
	}
	return l, err
}

// and parses terms joined by AND or by nothing at all.
func (p *parser) and() (filterExpr, error) {
	l, err := p.unary()
	for err == nil {
		if p.keyword("AND") {
			p.i++
		} else if t, ok := p.peek(); !ok || t.kind == ')' || p.keyword("OR") {
			break
		}
		var r filterExpr
		if r, err = p.unary(); err == nil {
			l = andExpr{l, r}
		}
	}
	return l, err
}

func (p *parser) unary() (filterExpr, error) {
	if p.keyword("NOT") {
		p.i++
		e, err := p.unary()
		return notExpr{e}, err
	}
	t, ok := p.peek()
	if ok && t.kind == '(' {
		p.i++
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if c, ok := p.next(); !ok || c.kind != ')' {
			return nil, errors.Errorf(errFmtExpected, "')'", c.pos)
		}
		return e, nil
	}
	return p.comparison()
}

func (p *parser) comparison() (filterExpr, error) {
	f, ok := p.next()
	if !ok || f.kind != 'w' {
		return nil, errors.Errorf(errFmtExpected, "a field name", f.pos)
	}
	op, ok := p.next()
	if !ok || !(op.kind == 'o' || op.kind == 'w' && (op.text == "eq" || op.text == "ne")) {
		return nil, errors.Errorf(errFmtExpected, "=, !=, :, eq or ne", op.pos)
	}
	v, ok := p.next()
	if !ok || (v.kind != 'w' && v.kind != 's') {
		return nil, errors.Errorf(errFmtExpected, "a value", v.pos)
	}
	c := cmpExpr{path: strings.Split(f.text, "."), op: op.text, val: v.text}
	if c.op == "eq" || c.op == "ne" {
		re, err := regexp.Compile("^(?:" + v.text + ")$")
		if err != nil {
			return nil, errors.Errorf(errFmtRegexp, v.text)
		}
		c.re = re
	}
	return c, nil
}
