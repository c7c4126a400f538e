package claudecode

import (
	"encoding/json"
)

// TailRepair turns a final JSON object that EOF cut off (the CLI killed in
// the middle of a line) into a map, when that can be done honestly: an open
// string value is closed (dropping a half-written escape), open objects and
// arrays are closed, and a dangling key, colon, comma or half-written
// literal is dropped back to the last complete member. It returns false if
// the tail does not start an object or is not JSON even as a prefix. The
// repaired map goes through the parser like any other event, so a
// truncated event that lacks what its type needs is still a protocol error.
// It is safe for concurrent use.
func TailRepair(tail []byte) (map[string]any, bool) {
	s := scan(tail)
	if s == nil {
		return nil, false
	}
	var candidates []string
	n := len(tail)
	switch {
	case s.inStr && !s.strIsKey:
		// Close the open string value; a trailing partial escape (\ or
		// \uXX) cannot be closed as is, so try without up to six bytes.
		for trim := 0; trim <= 6 && trim <= n-s.strStart-1; trim++ {
			candidates = append(candidates, string(tail[:n-trim])+`"`+s.closers())
		}
	case s.inLit:
		candidates = append(candidates, string(tail)+s.closers())
	}
	for i := len(s.cuts) - 1; i >= 0; i-- {
		c := s.cuts[i]
		candidates = append(candidates, string(tail[:c.pos])+c.closers)
	}
	for _, c := range candidates {
		var m map[string]any
		if json.Unmarshal([]byte(c), &m) == nil && m != nil {
			return m, true
		}
	}
	return nil, false
}

// The states of an open container.
const (
	wantKey   = iota // object: a key or '}'
	wantColon        // object: ':' after a key
	wantValue        // a value (array: or ']')
	wantMore         // ',' or the closing bracket
)

type frame struct {
	open  byte
	state int
}

// cut is a prefix length after which closing the open containers gives
// valid JSON.
type cut struct {
	pos     int
	closers string
}

type scanner struct {
	stack    []frame
	cuts     []cut // the last few, oldest first
	inStr    bool
	esc      bool
	strIsKey bool
	strStart int
	inLit    bool
}

const keepCuts = 4

func (s *scanner) closers() string {
	b := make([]byte, 0, len(s.stack))
	for i := len(s.stack) - 1; i >= 0; i-- {
		if s.stack[i].open == '{' {
			b = append(b, '}')
		} else {
			b = append(b, ']')
		}
	}
	return string(b)
}

func (s *scanner) mark(pos int) {
	s.cuts = append(s.cuts, cut{pos, s.closers()})
	if len(s.cuts) > keepCuts {
		s.cuts = s.cuts[1:]
	}
}

// valueDone records that a complete value ended at pos.
func (s *scanner) valueDone(pos int) {
	if len(s.stack) > 0 {
		s.stack[len(s.stack)-1].state = wantMore
	}
	s.mark(pos)
}

func (s *scanner) top() *frame { return &s.stack[len(s.stack)-1] }

// scan walks tail as a JSON object prefix. It returns nil if tail is not
// one.
func scan(tail []byte) *scanner {
	s := &scanner{}
	started := false
	for i := 0; i < len(tail); i++ {
		c := tail[i]
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
				if s.strIsKey {
					s.top().state = wantColon
				} else {
					s.valueDone(i + 1)
				}
			}
			continue
		}
		if s.inLit {
			if isLiteralByte(c) {
				continue
			}
			s.inLit = false
			s.valueDone(i)
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case !started:
			if c != '{' {
				return nil
			}
			started = true
			s.stack = append(s.stack, frame{'{', wantKey})
			s.mark(i + 1)
		case len(s.stack) == 0:
			return s // the object is complete; what follows is not ours
		case c == '{' || c == '[':
			if s.top().state != wantValue {
				return nil
			}
			st := wantValue
			if c == '{' {
				st = wantKey
			}
			s.stack = append(s.stack, frame{c, st})
			s.mark(i + 1)
		case c == '}' || c == ']':
			f := s.top()
			ok := c == '}' && f.open == '{' && (f.state == wantKey || f.state == wantMore) ||
				c == ']' && f.open == '[' && (f.state == wantValue || f.state == wantMore)
			if !ok {
				return nil
			}
			s.stack = s.stack[:len(s.stack)-1]
			s.valueDone(i + 1)
		case c == ':':
			if s.top().state != wantColon {
				return nil
			}
			s.top().state = wantValue
		case c == ',':
			f := s.top()
			if f.state != wantMore {
				return nil
			}
			if f.open == '{' {
				f.state = wantKey
			} else {
				f.state = wantValue
			}
		case c == '"':
			f := s.top()
			switch {
			case f.open == '{' && f.state == wantKey:
				s.strIsKey = true
			case f.state == wantValue:
				s.strIsKey = false
			default:
				return nil
			}
			s.inStr, s.strStart = true, i
		case c == '-' || '0' <= c && c <= '9' || c == 't' || c == 'f' || c == 'n':
			if s.top().state != wantValue {
				return nil
			}
			s.inLit = true
		default:
			return nil
		}
	}
	if !started {
		return nil
	}
	return s
}

func isLiteralByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'E'
}
