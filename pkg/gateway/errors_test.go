package gateway_test

import (
	"net/http"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		in         wire.Class
		wantStatus int
		wantType   string
		wantCode   string
	}{
		{wire.ProviderAuthError, http.StatusUnauthorized, "authentication_error", "provider_auth_error"},
		{wire.ProviderQuotaError, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"},
		{wire.AdmissionRejected, http.StatusTooManyRequests, "rate_limit_error", "admission_rejected"},
		{wire.BudgetExceeded, http.StatusPaymentRequired, "insufficient_quota", "budget_exceeded"},
		{wire.AgenticRequestValidationError, http.StatusBadRequest, "invalid_request_error", "invalid_request"},
		{wire.AgenticOperationUnsupported, http.StatusBadRequest, "invalid_request_error", "unsupported"},
		{wire.ProviderContextError, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"},
		{wire.PinMismatch, http.StatusConflict, "invalid_request_error", "pin_mismatch"},
		{wire.SessionEnded, http.StatusConflict, "invalid_request_error", "session_ended"},
		{wire.PermissionTimeout, http.StatusConflict, "invalid_request_error", "permission_timeout"},
		{wire.SessionLost, http.StatusGone, "invalid_request_error", "session_lost"},
		{wire.ProviderUnavailable, http.StatusServiceUnavailable, "service_unavailable", "provider_unavailable"},
		{wire.ProfileError, http.StatusServiceUnavailable, "service_unavailable", "provider_unavailable"},
		{wire.DeadlineExceeded, http.StatusGatewayTimeout, "server_error", "timeout"},
		{wire.ProviderStallError, http.StatusBadGateway, "server_error", "provider_error"},
		{wire.ProviderError, http.StatusBadGateway, "server_error", "provider_error"},
		{wire.AgenticHandlerError, http.StatusBadGateway, "server_error", "provider_error"},
	}
	for _, tt := range tests {
		t.Run(string(tt.in), func(t *testing.T) {
			got := gateway.Status(wire.Errorf(tt.in, "the %s message", tt.in))
			if got.Status != tt.wantStatus || got.Type != tt.wantType || got.Code == nil || *got.Code != tt.wantCode {
				t.Errorf("Status(%s) = %d %s %v, want %d %s %s", tt.in, got.Status, got.Type, got.Code, tt.wantStatus, tt.wantType, tt.wantCode)
			}
			if got.Message != "the "+string(tt.in)+" message" {
				t.Errorf("Status(%s) message = %q, want the mesh's", tt.in, got.Message)
			}
		})
	}
}

// A retryable admission refusal says when to come back: its
// retry_after_ms rounded up to seconds, else 1 s; a final one does not.
func TestStatusRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		in   *wire.Error
		want int
	}{
		{wire.Errorf(wire.AdmissionRejected, "queued").Retry(), 1},
		{&wire.Error{Class: wire.AdmissionRejected, Message: "busy", Retryable: true, RetryAfterMS: 2500}, 3},
		{wire.Errorf(wire.AdmissionRejected, "full"), 0},
		{wire.Errorf(wire.SessionEnded, "ended").Retry(), 0},
	} {
		if got := gateway.Status(tt.in); got.RetryAfter != tt.want {
			t.Errorf("Status(%+v).RetryAfter = %d, want %d", tt.in, got.RetryAfter, tt.want)
		}
	}
}
