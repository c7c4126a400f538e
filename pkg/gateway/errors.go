package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// APIError is an error in OpenAI's shape, with the HTTP status it is
// served with.
type APIError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// RetryAfter, when above 0, is sent as the Retry-After header, in
	// seconds.
	RetryAfter int `json:"-"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// The OpenAI error types the gateway answers with.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeRateLimit      = "rate_limit_error"
	typeQuota          = "insufficient_quota"
	typeServer         = "server_error"
	typeUnavailable    = "service_unavailable"
	typeNotFound       = "not_found_error"
)

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func apiErr(status int, typ, code, param, format string, args ...any) *APIError {
	return &APIError{Status: status, Message: fmt.Sprintf(format, args...), Type: typ, Param: ptr(param), Code: ptr(code)}
}

// invalid is a 400 naming param.
func invalid(param, format string, args ...any) *APIError {
	return apiErr(http.StatusBadRequest, typeInvalidRequest, "invalid_request", param, format, args...)
}

// Status maps a typed wire error to its OpenAI-shaped error: its class
// decides the status and code (docs/contract.md §1.5), its message is the
// mesh's, already redacted.
//
//	ProviderAuthError                       401 authentication_error
//	ProviderQuotaError                      429 rate_limit_error
//	AdmissionRejected                       429 rate_limit_error, code admission_rejected
//	                                        (retryable: Retry-After, its retry_after_ms or 1 s)
//	BudgetExceeded                          402 insufficient_quota, code budget_exceeded
//	AgenticRequestValidationError           400 invalid_request_error
//	AgenticOperationUnsupported             400 invalid_request_error, code unsupported
//	ProviderContextError                    400 invalid_request_error, code context_length_exceeded
//	PinMismatch                             409 invalid_request_error, code pin_mismatch
//	SessionEnded                            409 invalid_request_error, code session_ended
//	PermissionTimeout                       409 invalid_request_error, code permission_timeout
//	SessionLost                             410 invalid_request_error, code session_lost
//	ProviderUnavailable, ProfileError       503 service_unavailable
//	DeadlineExceeded                        504 server_error, code timeout
//	any other ProviderError, anything else  502 server_error, code provider_error
//
// A 402 rather than a 429 for a budget: the SDKs retry a 429 on their own,
// and a budget stays spent until its period ends.
func Status(we *wire.Error) *APIError {
	msg := we.Message
	if msg == "" {
		msg = string(we.Class)
	}
	e := func(status int, typ, code string) *APIError {
		return &APIError{Status: status, Message: msg, Type: typ, Code: ptr(code)}
	}
	switch c := we.Class; {
	case c.IsA(wire.ProviderAuthError):
		return e(http.StatusUnauthorized, typeAuthentication, "provider_auth_error")
	case c.IsA(wire.ProviderQuotaError):
		return e(http.StatusTooManyRequests, typeRateLimit, "rate_limit_exceeded")
	case c == wire.AdmissionRejected:
		ae := e(http.StatusTooManyRequests, typeRateLimit, "admission_rejected")
		if we.Retryable {
			ae.RetryAfter = max(1, int((we.RetryAfterMS+999)/1000))
		}
		return ae
	case c == wire.BudgetExceeded:
		return e(http.StatusPaymentRequired, typeQuota, "budget_exceeded")
	case c == wire.AgenticRequestValidationError:
		return e(http.StatusBadRequest, typeInvalidRequest, "invalid_request")
	case c == wire.AgenticOperationUnsupported:
		return e(http.StatusBadRequest, typeInvalidRequest, "unsupported")
	case c.IsA(wire.ProviderContextError):
		return e(http.StatusBadRequest, typeInvalidRequest, "context_length_exceeded")
	case c == wire.PinMismatch:
		return e(http.StatusConflict, typeInvalidRequest, "pin_mismatch")
	case c == wire.SessionEnded:
		return e(http.StatusConflict, typeInvalidRequest, "session_ended")
	case c == wire.PermissionTimeout:
		return e(http.StatusConflict, typeInvalidRequest, "permission_timeout")
	case c == wire.SessionLost:
		return e(http.StatusGone, typeInvalidRequest, "session_lost")
	case c == wire.ProviderUnavailable || c == wire.ProfileError:
		return e(http.StatusServiceUnavailable, typeUnavailable, "provider_unavailable")
	case c == wire.DeadlineExceeded:
		return e(http.StatusGatewayTimeout, typeServer, "timeout")
	}
	return e(http.StatusBadGateway, typeServer, "provider_error")
}

// asAPIError is err as an OpenAI-shaped error: an *APIError as it is, a
// typed wire error by Status, anything else a 502 whose message is err's.
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return Status(we)
	}
	return apiErr(http.StatusBadGateway, typeServer, "mesh_error", "", "%v", err)
}

// errorBody is the JSON body of e: {"error": {...}}.
func errorBody(e *APIError) []byte {
	b, _ := json.Marshal(struct {
		Error *APIError `json:"error"`
	}{e})
	return b
}

// writeError answers with e.
func writeError(w http.ResponseWriter, e *APIError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(errorBody(e), '\n'))
}
