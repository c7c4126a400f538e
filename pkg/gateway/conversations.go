package gateway

import (
	"errors"
	"net/http"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

// conversationHistory answers GET /v1/conversations/{id}/history: the
// conversation's runs, in the order the mesh accepted them, each with its
// first prompt and its chunks (client.History), for the key's tenant. A
// conversation of another tenant, or one the mesh has no log of, is a 404
// conversation_not_found.
func (g *Gateway) conversationHistory(w http.ResponseWriter, r *http.Request, who caller) {
	id := r.PathValue("id")
	if err := subject.ValidToken("conversation", id); err != nil {
		writeError(w, invalid("id", "%v", err))
		return
	}
	h, err := g.client.History(r.Context(), who.Tenant, id)
	switch {
	case errors.Is(err, client.ErrNotFound):
		writeError(w, historyNotFound(id))
	case err != nil:
		writeError(w, asAPIError(err))
	default:
		writeJSON(w, http.StatusOK, h, nil)
	}
}

// historyNotFound is the answer for a conversation the key's tenant
// does not have.
func historyNotFound(id string) *APIError {
	return apiErr(http.StatusNotFound, typeNotFound, "conversation_not_found", "", "no conversation %q for this key's tenant", id)
}
