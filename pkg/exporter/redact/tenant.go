package redact

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
)

// tenantRule is a compiled tenant rule with what its expression tells about
// where a match can be, so that most text is never given to the regexp
// engine:
//
//   - req is a literal that every match contains (case-folded when fold);
//     text without it holds no match.
//   - seps are ASCII bytes that no match can contain (and, when the
//     expression has \b or \B, that are not word characters). A match then
//     lies inside one segment between separators, and the engine runs only
//     on the segments that hold req. The result is the same as running it
//     on the whole text: a segment's edges look to \b and \B as the
//     separators around it do, and expressions with ^ or $ are always run
//     on the whole text.
type tenantRule struct {
	re   *regexp.Regexp
	req  string
	k    int // the byte of req to search for (indexAt)
	fold bool
	seps *[256]bool // nil: run on the whole text
	// can are the bytes a match may contain (all non-ASCII bytes among
	// them), minLen the fewest bytes a match has: a run of can around req
	// shorter than minLen holds no match, so its segment is not searched.
	can    *[256]bool
	minLen int
}

func compileTenant(pattern string, tree *syntax.Regexp) tenantRule {
	t := tenantRule{re: regexp.MustCompile(pattern)}
	t.req, t.fold = requiredLiteral(tree)
	if t.req != "" {
		t.k = rarest(t.req)
	}
	if t.req == "" || hasOp(tree, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText) {
		return t
	}
	var can [256]bool
	matchable(tree, &can)
	for b := int(unicode.MaxASCII) + 1; b < len(can); b++ {
		can[b] = true
	}
	t.can, t.minLen = &can, minLen(tree)
	boundary := hasOp(tree, syntax.OpWordBoundary, syntax.OpNoWordBoundary)
	var seps [256]bool
	n := 0
	for b := 0; b < unicode.MaxASCII+1; b++ {
		if !can[b] && (!boundary || !wordChars[b]) {
			seps[b] = true
			n++
		}
	}
	if n > 0 {
		t.seps = &seps
	}
	return t
}

// find appends the spans of the rule's matches in in to out.
func (t *tenantRule) find(in string, prio int, out []span) []span {
	if t.seps == nil {
		if t.req != "" && t.index(in) < 0 {
			return out
		}
		return t.findIn(in, 0, prio, out)
	}
	lo, hi := 0, -1 // the segment around the last occurrence; in[hi] is a separator
	for pos := 0; pos < len(in); {
		i := t.index(in[pos:])
		if i < 0 {
			break
		}
		q := pos + i
		if q >= hi { // a new segment
			lo = q
			for lo > max(hi, 0) && !t.seps[in[lo-1]] {
				lo--
			}
			hi = q + len(t.req)
			for hi < len(in) && !t.seps[in[hi]] {
				hi++
			}
		}
		// The run of matchable bytes around the occurrence, looked at no
		// further than minLen: each occurrence costs O(minLen) at most.
		mlo, mhi := q, q+len(t.req)
		for mlo > lo && mhi-mlo < t.minLen && t.can[in[mlo-1]] {
			mlo--
		}
		for mhi < hi && mhi-mlo < t.minLen && t.can[in[mhi]] {
			mhi++
		}
		if mhi-mlo < t.minLen {
			pos = q + 1
			continue
		}
		out = t.findIn(in[lo:hi], lo, prio, out)
		pos = hi
	}
	return out
}

// findIn appends the matches in seg, which starts at off in the text.
func (t *tenantRule) findIn(seg string, off, prio int, out []span) []span {
	if !t.re.MatchString(seg) { // MatchString does not allocate; FindAll does, even for nothing
		return out
	}
	for _, loc := range t.re.FindAllStringIndex(seg, -1) {
		out = append(out, span{lo: off + loc[0], hi: off + loc[1], prio: prio})
	}
	return out
}

func (t *tenantRule) index(s string) int {
	if t.fold {
		return indexFold(s, t.req)
	}
	return indexAt(s, t.req, t.k)
}

// requiredLiteral returns the longest literal that every match of re
// contains, or "". When fold is set the literal is lower-case ASCII and
// occurs in any mix of cases; it holds no k or s, whose case folds include
// non-ASCII runes (K, ſ), so that an ASCII search finds every occurrence.
func requiredLiteral(re *syntax.Regexp) (lit string, fold bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase == 0 {
			return string(re.Rune), false
		}
		best, cur := "", []byte{}
		for _, r := range append(re.Rune, 0) {
			if r > 0 && r <= unicode.MaxASCII && !strings.ContainsRune("kKsS", r) {
				cur = append(cur, byte(unicode.ToLower(r)))
				continue
			}
			if len(cur) > len(best) {
				best = string(cur)
			}
			cur = cur[:0]
		}
		return best, true
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			l, f := requiredLiteral(sub)
			if len(l) > len(lit) || len(l) == len(lit) && fold && !f {
				lit, fold = l, f
			}
		}
		return lit, fold
	}
	return "", false
}

// matchable marks in can every ASCII byte that a match of re may contain.
func matchable(re *syntax.Regexp, can *[256]bool) {
	mark := func(r rune) {
		for f := r; ; {
			if f <= unicode.MaxASCII {
				can[f] = true
			}
			if re.Flags&syntax.FoldCase == 0 {
				return
			}
			if f = unicode.SimpleFold(f); f == r {
				return
			}
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			mark(r)
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= min(re.Rune[i+1], unicode.MaxASCII); r++ {
				can[r] = true
			}
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		for b := range can {
			can[b] = re.Op == syntax.OpAnyChar || b != '\n'
		}
	}
	for _, sub := range re.Sub {
		matchable(sub, can)
	}
}

func hasOp(re *syntax.Regexp, ops ...syntax.Op) bool {
	for _, op := range ops {
		if re.Op == op {
			return true
		}
	}
	for _, sub := range re.Sub {
		if hasOp(sub, ops...) {
			return true
		}
	}
	return false
}

// indexFold is strings.Index for a lower-case ASCII literal that may occur
// in any mix of cases.
func indexFold(s, lit string) int {
	c0 := lit[0]
	c1 := c0
	if c0 >= 'a' && c0 <= 'z' {
		c1 = c0 - 'a' + 'A'
	}
	n0, n1 := -2, -2 // next position of c0 and c1 at or after pos; -1 none, -2 not searched
	next := func(n int, c byte, pos int) int {
		if n == -1 || n >= pos {
			return n
		}
		if i := strings.IndexByte(s[pos:], c); i >= 0 {
			return pos + i
		}
		return -1
	}
	for pos := 0; ; {
		n0 = next(n0, c0, pos)
		i := n0
		if c1 != c0 {
			n1 = next(n1, c1, pos)
			if i < 0 || n1 >= 0 && n1 < i {
				i = n1
			}
		}
		if i < 0 || i+len(lit) > len(s) {
			return -1
		}
		if equalFoldASCII(s[i:i+len(lit)], lit) {
			return i
		}
		pos = i + 1
	}
}

func equalFoldASCII(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// minLen returns the fewest bytes a match of re has (a rune is at least one).
func minLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minLen(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minLen(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += minLen(sub)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, sub := range re.Sub {
			if m := minLen(sub); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0 // star, quest, empty-width
}
