package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/artifacts"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
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

// checkWorkspace checks a run's workspace source at the door, for the
// body field param ("workspace" of the runs API, "agentmesh_workspace" of
// chat completions and responses): its shape (wire.WorkspaceSource.Check),
// that the profile runs an agent CLI, the only runs that take one, and
// that a snapshot is stored for the tenant (not unknown, not expired)
// within the store's limit. Each refusal is a 400 naming the field. A
// git remote outside the allow-list is for the runner to refuse: the
// allow-list is each runner's (AGENTMESH_RUNNER_GIT_ALLOW), and its
// refusal ends the run with an AgenticRequestValidationError that names
// workspace.git.url.
func (g *Gateway) checkWorkspace(ctx context.Context, tenant string, p *profile.Profile, ws *wire.WorkspaceSource, param string) *APIError {
	if ws == nil {
		return nil
	}
	field := func(f string) string { return param + strings.TrimPrefix(f, "workspace") }
	if err := ws.Check(); err != nil {
		var fe *wire.WorkspaceFieldError
		if errors.As(err, &fe) {
			return invalid(field(fe.Field), "%s: %s", field(fe.Field), fe.Why)
		}
		return invalid(param, "%s: %v", param, err)
	}
	if p.Transport != wire.TransportSubprocess {
		return apiErr(http.StatusBadRequest, typeInvalidRequest, "unsupported", param,
			"%s: profile %q (adapter %s) is not an agent CLI; only a CLI run takes a workspace", param, p.Name, p.Adapter)
	}
	if ws.Snapshot == "" || g.artifacts == nil {
		return nil
	}
	f := field("workspace.snapshot")
	_, err := g.artifacts.StatSnapshot(ctx, tenant, ws.Snapshot)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, artifacts.ErrNotFound):
		return apiErr(http.StatusBadRequest, typeInvalidRequest, "snapshot_not_found", f,
			"%s: snapshot %s is not stored for this key's tenant: never pushed (agentmesh workspace push --tenant %s DIR), or expired", f, ws.Snapshot, tenant)
	case errors.Is(err, artifacts.ErrTooLarge):
		return apiErr(http.StatusBadRequest, typeInvalidRequest, "snapshot_too_large", f, "%s: %v", f, err)
	case errors.Is(err, artifacts.ErrInvalidName):
		return invalid(f, "%s: %v", f, err)
	}
	return asAPIError(err)
}
