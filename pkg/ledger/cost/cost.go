// Package cost prices token usage exactly: rates are decimal strings in USD
// per million tokens, arithmetic is rational (math/big.Rat), and the result
// is an exact decimal string. A zero rate is a real zero; float64 is never
// used, so large counts never round.
package cost

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Token classes, as profiles name them.
const (
	Input      = "input"
	Output     = "output"
	CacheRead  = "cache_read"
	CacheWrite = "cache_write"
	Reasoning  = "reasoning"
)

// ErrUnpriced is returned when usage has tokens of a class the pricing
// does not price.
var ErrUnpriced = errors.New("token class has no price")

var million = big.NewRat(1_000_000, 1)

// Of returns the exact cost in USD of usage under pricing, as a decimal
// string with no trailing zeros ("0" for nothing). Every class with tokens
// must be priced.
func Of(pricing map[string]string, u wire.Usage) (string, error) {
	total, err := Rat(pricing, u)
	if err != nil {
		return "", err
	}
	return Format(total), nil
}

// Rat is Of as a rational number.
func Rat(pricing map[string]string, u wire.Usage) (*big.Rat, error) {
	total := new(big.Rat)
	for _, c := range []struct {
		class  string
		tokens int64
	}{{Input, u.InputTokens}, {Output, u.OutputTokens}, {CacheRead, u.CacheReadTokens}, {CacheWrite, u.CacheWriteTokens}, {Reasoning, u.ReasoningTokens}} {
		if c.tokens == 0 {
			continue
		}
		if c.tokens < 0 {
			return nil, fmt.Errorf("usage: %s tokens %d < 0", c.class, c.tokens)
		}
		rate, ok := pricing[c.class]
		if !ok {
			return nil, fmt.Errorf("%w: %s (%d tokens)", ErrUnpriced, c.class, c.tokens)
		}
		r, ok := new(big.Rat).SetString(rate)
		if !ok || r.Sign() < 0 {
			return nil, fmt.Errorf("pricing: %s rate %q is not a non-negative decimal", c.class, rate)
		}
		r.Mul(r, new(big.Rat).SetInt64(c.tokens))
		total.Add(total, r.Quo(r, million))
	}
	return total, nil
}

// Format renders r exactly as a decimal (r is a sum of decimal rates times
// integers over a million, so its expansion terminates).
func Format(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	// Enough digits for any decimal rate over 10^6: find the exact
	// expansion by scaling until it is an integer.
	for prec := 1; prec <= 64; prec++ {
		scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil)))
		if scaled.IsInt() {
			s := r.FloatString(prec)
			return strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
	}
	return r.FloatString(64) // not reached for decimal rates
}

// Add sums exact decimal costs.
func Add(costs ...string) (string, error) {
	total := new(big.Rat)
	for _, c := range costs {
		r, ok := new(big.Rat).SetString(c)
		if !ok {
			return "", fmt.Errorf("cost %q is not a decimal", c)
		}
		total.Add(total, r)
	}
	return Format(total), nil
}
