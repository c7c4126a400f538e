//go:build smoke

package e2e

// Credentialed smoke tests against the real OpenAI and Anthropic APIs:
// explicit (make smoke, build tag smoke), never in CI, and skipped cleanly
// when the provider's key is not set. AGENTMESH_SMOKE_OPENAI_MODEL and
// AGENTMESH_SMOKE_ANTHROPIC_MODEL choose the models.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/anthropic"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/openai"
	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func smokeEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func smoke(t *testing.T, a adapter.Adapter, model string) {
	t.Helper()
	req, err := wire.Marshal(map[string]any{"prompt": "Reply with the single word: pong", "max_tokens": 64})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := a.Validate(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var text strings.Builder
	var result *wire.Chunk
	for c, err := range a.Stream(ctx, adapter.Call{RunID: "smoke", Request: typed, Model: model, Attempt: 1, MaxAttempts: 1}) {
		if err != nil {
			t.Fatalf("%s: %v", a.Name(), err)
		}
		switch c.Type {
		case wire.ChunkText:
			text.WriteString(c.Content)
		case wire.ChunkResult:
			result = &c
		case wire.ChunkError:
			t.Fatalf("%s: provider error: %s", a.Name(), c.Content)
		}
	}
	if !strings.Contains(strings.ToLower(text.String()), "pong") || result == nil || result.Metadata.Usage == nil {
		t.Fatalf("%s: text %q, result %+v; want pong and usage", a.Name(), text.String(), result)
	}
	t.Logf("%s %s: %q, usage %+v", a.Name(), model, text.String(), *result.Metadata.Usage)
}

func TestSmokeOpenAI(t *testing.T) {
	key, ok := secret.FromEnv("OPENAI_API_KEY")
	if !ok {
		t.Skip("OPENAI_API_KEY is not set")
	}
	model := smokeEnv("AGENTMESH_SMOKE_OPENAI_MODEL", "gpt-5.5")
	a, err := openai.New(remote.Config{BaseURL: smokeEnv("AGENTMESH_SMOKE_OPENAI_URL", "https://api.openai.com/v1"), Credential: key},
		openai.Options{NoTemperatureModels: []string{model}})
	if err != nil {
		t.Fatal(err)
	}
	smoke(t, a, model)
}

func TestSmokeAnthropic(t *testing.T) {
	key, ok := secret.FromEnv("ANTHROPIC_API_KEY")
	if !ok {
		t.Skip("ANTHROPIC_API_KEY is not set")
	}
	model := smokeEnv("AGENTMESH_SMOKE_ANTHROPIC_MODEL", "claude-sonnet-4-5")
	a, err := anthropic.New(remote.Config{BaseURL: smokeEnv("AGENTMESH_SMOKE_ANTHROPIC_URL", "https://api.anthropic.com"), Credential: key})
	if err != nil {
		t.Fatal(err)
	}
	smoke(t, a, model)
}
