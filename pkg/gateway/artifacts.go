package gateway

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

// A run's artifacts (pkg/artifacts): GET /v1/runs/{id}/artifacts lists
// them, GET /v1/runs/{id}/artifacts/{name} serves one's bytes. Like the
// other runs routes they are the key's tenant's only.

// SetArtifacts makes the gateway serve runs' artifacts from s. Call it
// before the gateway serves (Open does); without it the artifact routes
// answer 503.
func (g *Gateway) SetArtifacts(s *artifacts.Store) { g.artifacts = s }

// artifactJSON is one artifact as the runs API lists it.
type artifactJSON struct {
	Name    string `json:"name"`
	Object  string `json:"object"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	Created int64  `json:"created"`
	Expires int64  `json:"expires"`
}

// artifactError maps a failure of the artifact store to the runs API's
// errors: a bad name 400, none stored 404, anything else asAPIError's.
func artifactError(id, name string, err error) *APIError {
	switch {
	case errors.Is(err, subject.ErrInvalidToken), errors.Is(err, artifacts.ErrInvalidName):
		return invalid("name", "%v", err)
	case errors.Is(err, artifacts.ErrNotFound):
		return apiErr(http.StatusNotFound, typeNotFound, "artifact_not_found", "name", "run %q has no artifact %q", id, name)
	}
	return asAPIError(err)
}

// artifactsReady answers 503 when the gateway serves no artifacts.
func (g *Gateway) artifactsReady(w http.ResponseWriter) bool {
	if g.artifacts == nil {
		writeError(w, apiErr(http.StatusServiceUnavailable, typeUnavailable, "artifacts_unavailable", "", "this gateway serves no artifacts"))
		return false
	}
	return true
}

func (g *Gateway) listArtifacts(w http.ResponseWriter, r *http.Request, who caller) {
	id := r.PathValue("id")
	if !g.artifactsReady(w) {
		return
	}
	if e := g.ownRun(r, who, id); e != nil {
		writeError(w, e)
		return
	}
	recs, err := g.artifacts.List(r.Context(), who.Tenant, id)
	if err != nil {
		writeError(w, artifactError(id, "", err))
		return
	}
	out := make([]artifactJSON, 0, len(recs))
	for _, rec := range recs {
		out = append(out, artifactJSON{Name: rec.Name, Object: rec.Object, SHA256: rec.SHA256, Size: rec.Size, Created: rec.Created, Expires: rec.Expires})
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": id, "artifacts": out}, nil)
}

// getArtifact serves an artifact's bytes, with its SHA-256 in
// X-Artifact-SHA256 and as the ETag. Bytes that do not match their record
// are found only as they are read: the response is then cut short, never
// completed with them.
func (g *Gateway) getArtifact(w http.ResponseWriter, r *http.Request, who caller) {
	id, name := r.PathValue("id"), r.PathValue("name")
	if !g.artifactsReady(w) {
		return
	}
	if err := subject.ValidToken("run_id", id); err != nil {
		writeError(w, invalid("run_id", "%v", err))
		return
	}
	rc, rec, err := g.artifacts.Open(r.Context(), who.Tenant, id, name)
	if err != nil {
		writeError(w, artifactError(id, name, err))
		return
	}
	defer func() { _ = rc.Close() }()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(rec.Size, 10))
	h.Set("X-Artifact-SHA256", rec.SHA256)
	h.Set("ETag", `"sha256:`+rec.SHA256+`"`)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		g.log.Warn("serve artifact", "tenant", who.Tenant, "run_id", id, "name", name, "err", err)
		panic(http.ErrAbortHandler) // the client sees a cut response, not wrong bytes
	}
}
