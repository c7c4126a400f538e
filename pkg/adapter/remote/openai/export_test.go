package openai

import (
	"context"
	"io"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// ParseStream runs the event parser over body as Stream does once the
// response has arrived, for a request that declared tools (canonical
// names), and returns the chunks and the final error. It saves nothing.
func ParseStream(body io.Reader, model string, tools []string) ([]wire.Chunk, error) {
	p := newParser(model, aliases(tools))
	var chunks []wire.Chunk
	err := p.read(context.Background(), body, func() error { return nil }, func(cs ...wire.Chunk) error {
		chunks = append(chunks, cs...)
		return nil
	})
	return chunks, err
}

// Alias is the provider-safe function name of a canonical tool name.
func Alias(name string) string { return alias(name) }
