package cost_test

import (
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

var sonnet = map[string]string{"input": "3", "output": "15", "cache_read": "0.30", "cache_write": "3.75", "reasoning": "15"}

func TestOf(t *testing.T) {
	tests := []struct {
		name    string
		pricing map[string]string
		in      wire.Usage
		want    string
		wantErr error
	}{
		{"nothing", sonnet, wire.Usage{}, "0", nil},
		{"every class", sonnet, wire.Usage{InputTokens: 1000, OutputTokens: 500, CacheReadTokens: 2000, CacheWriteTokens: 100, ReasoningTokens: 50},
			// 1000*3 + 500*15 + 2000*0.30 + 100*3.75 + 50*15 = 3000+7500+600+375+750 = 12225 / 1e6
			"0.012225", nil},
		{"zero rate is a real zero", map[string]string{"input": "0", "output": "0"}, wire.Usage{InputTokens: 123456789, OutputTokens: 987654321}, "0", nil},
		{"one token of a tiny rate", map[string]string{"input": "0.000001"}, wire.Usage{InputTokens: 1}, "0.000000000001", nil},
		// float64 has 53 bits: 2^53+1 tokens at 1 USD per million would round.
		{"beyond float64", map[string]string{"input": "1"}, wire.Usage{InputTokens: 9007199254740993}, "9007199254.740993", nil},
		{"large and fractional", map[string]string{"output": "0.125"}, wire.Usage{OutputTokens: 9_000_000_000_000_001}, "1125000000.000000125", nil},
		{"unpriced class", map[string]string{"input": "3"}, wire.Usage{InputTokens: 1, OutputTokens: 1}, "", cost.ErrUnpriced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cost.Of(tt.pricing, tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Of = %q, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Of = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// The cost over a conversation's runs equals the cost of their summed usage.
func TestSumOfRunsIsCostOfSum(t *testing.T) {
	runs := []wire.Usage{
		{InputTokens: 1234, OutputTokens: 567, CacheReadTokens: 89},
		{InputTokens: 1, OutputTokens: 3, CacheWriteTokens: 7, ReasoningTokens: 11},
		{InputTokens: 999_999_999_999, OutputTokens: 1},
	}
	var costs []string
	var sum wire.Usage
	for _, u := range runs {
		c, err := cost.Of(sonnet, u)
		if err != nil {
			t.Fatal(err)
		}
		costs = append(costs, c)
		sum.InputTokens += u.InputTokens
		sum.OutputTokens += u.OutputTokens
		sum.CacheReadTokens += u.CacheReadTokens
		sum.CacheWriteTokens += u.CacheWriteTokens
		sum.ReasoningTokens += u.ReasoningTokens
	}
	total, err := cost.Add(costs...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cost.Of(sonnet, sum)
	if err != nil {
		t.Fatal(err)
	}
	if total != want {
		t.Fatalf("sum of runs %s != cost of summed usage %s", total, want)
	}
}
