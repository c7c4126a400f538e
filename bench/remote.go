package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/sse"
)

// ProfileFirstChunkLatency measures submit→first chunk through the mesh
// for runs of req on profile prof, one at a time, each of which must
// succeed with wantText text chunks.
func (m *Mesh) ProfileFirstChunkLatency(ctx context.Context, prof string, req []byte, wantText int, p Probe) (Latencies, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	out := make(Latencies, 0, p.Samples)
	for i := range p.Warmup + p.Samples {
		var d time.Duration
		start := time.Now()
		if err := m.run(ctx, prof, req, wantText, func() { d = time.Since(start) }); err != nil {
			return nil, err
		}
		if i >= p.Warmup {
			out = append(out, d)
		}
		if (i+1)%reapEvery == 0 {
			if err := reap(ctx, m.js, m.events); err != nil {
				return nil, err
			}
		}
	}
	return out, reap(ctx, m.js, m.events)
}

// DirectFirstEvent is the baseline of ProfileFirstChunkLatency: a plain
// HTTP client, new for each sample as the adapters' clients are, posts body
// to url and reads the server-sent events until the first one, then drains
// the rest.
func DirectFirstEvent(ctx context.Context, url string, body []byte, p Probe) (Latencies, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	out := make(Latencies, 0, p.Samples)
	for i := range p.Warmup + p.Samples {
		client := &http.Client{Transport: &http.Transport{Proxy: nil}}
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		if _, err := sse.NewReader(resp.Body).Next(); err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("direct: first event: %w", err)
		}
		d := time.Since(start)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		client.CloseIdleConnections()
		if i >= p.Warmup {
			out = append(out, d)
		}
	}
	return out, nil
}
