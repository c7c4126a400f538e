package wire

import (
	"slices"
)

// The append encoders below write the router's per-run messages, a
// RunRecord and a Work with its Handoff, straight into a byte slice, for
// the routing path, where reflection was a large part of the router's own
// cost. As AppendChunk, they write exactly the bytes Marshal writes for the
// same value (TestAppendRunSameAsMarshal holds them to it); free-form
// values (a work item's runtime, a record's error) go through the
// reflective encoder.

// AppendRunRecord appends rec's msgpack encoding, the same bytes
// Marshal(rec) gives, to dst. It fails only on an Error the reflective
// encoder refuses; dst is then returned as it was.
func AppendRunRecord(dst []byte, rec *RunRecord) ([]byte, error) {
	start := len(dst)
	n := 10 // v, run_id, tenant, principal, profile, request_digest, state, consent, created, updated
	for _, present := range [...]bool{
		rec.Adapter != "", rec.Conversation != "", rec.Pin != nil, rec.Owner != "", rec.Committed, rec.Attempt != 0,
		rec.Deadline != 0, rec.ConsentRev != 0, len(rec.Request) > 0, len(rec.Labels) > 0, rec.Error != nil,
		rec.Usage != nil, rec.Cost != "",
	} {
		if present {
			n++
		}
	}
	dst = appendMapHeader(dst, n)
	dst = appendInt(appendStr(dst, "v"), int64(rec.V))
	dst = appendKeyStr(dst, "run_id", rec.RunID)
	dst = appendKeyStr(dst, "tenant", rec.Tenant)
	dst = appendKeyStr(dst, "principal", rec.Principal)
	dst = appendKeyStr(dst, "profile", rec.Profile)
	if rec.Adapter != "" {
		dst = appendKeyStr(dst, "adapter", rec.Adapter)
	}
	if rec.Conversation != "" {
		dst = appendKeyStr(dst, "conversation", rec.Conversation)
	}
	dst = appendKeyStr(dst, "request_digest", rec.RequestDigest)
	if rec.Pin != nil {
		dst = appendPin(appendStr(dst, "pin"), rec.Pin)
	}
	dst = appendKeyStr(dst, "state", string(rec.State))
	if rec.Owner != "" {
		dst = appendKeyStr(dst, "owner", rec.Owner)
	}
	if rec.Committed {
		dst = appendBool(appendStr(dst, "committed"), true)
	}
	if rec.Attempt != 0 {
		dst = appendInt(appendStr(dst, "attempt"), int64(rec.Attempt))
	}
	if rec.Deadline != 0 {
		dst = appendInt(appendStr(dst, "deadline"), rec.Deadline)
	}
	dst = appendBool(appendStr(dst, "consent"), rec.Consent)
	if rec.ConsentRev != 0 {
		dst = appendUint(appendStr(dst, "consent_rev"), rec.ConsentRev)
	}
	if len(rec.Request) > 0 {
		dst = append(appendStr(dst, "request"), rec.Request...)
	}
	if len(rec.Labels) > 0 {
		dst = appendStringMap(appendStr(dst, "labels"), rec.Labels)
	}
	if rec.Error != nil {
		var err error
		if dst, err = appendValue(appendStr(dst, "error"), rec.Error); err != nil {
			return dst[:start], err
		}
	}
	if rec.Usage != nil {
		dst = appendUsage(appendStr(dst, "usage"), rec.Usage)
	}
	if rec.Cost != "" {
		dst = appendKeyStr(dst, "cost", rec.Cost)
	}
	dst = appendInt(appendStr(dst, "created"), rec.Created)
	dst = appendInt(appendStr(dst, "updated"), rec.Updated)
	return dst, nil
}

// AppendWork appends wk's msgpack encoding, the same bytes Marshal(wk)
// gives, to dst, its handoff's record included. It fails only on a
// Runtime or an Error the reflective encoder refuses; dst is then
// returned as it was.
func AppendWork(dst []byte, wk *Work) ([]byte, error) {
	start := len(dst)
	n := 8 // v, run_id, tenant, principal, adapter, pin, deadline, policy
	for _, present := range [...]bool{
		wk.Profile != "", len(wk.Request) > 0, len(wk.Runtime) > 0, wk.Conversation != "", wk.SessionID != "", wk.Handoff != nil, len(wk.Fallback) > 0, wk.Workspace != nil,
	} {
		if present {
			n++
		}
	}
	dst = appendMapHeader(dst, n)
	dst = appendInt(appendStr(dst, "v"), int64(wk.V))
	dst = appendKeyStr(dst, "run_id", wk.RunID)
	dst = appendKeyStr(dst, "tenant", wk.Tenant)
	dst = appendKeyStr(dst, "principal", wk.Principal)
	dst = appendKeyStr(dst, "adapter", wk.Adapter)
	if wk.Profile != "" {
		dst = appendKeyStr(dst, "profile", wk.Profile)
	}
	if len(wk.Request) > 0 {
		dst = append(appendStr(dst, "request"), wk.Request...)
	}
	var err error
	if len(wk.Runtime) > 0 {
		if dst, err = appendValue(appendStr(dst, "runtime"), wk.Runtime); err != nil {
			return dst[:start], err
		}
	}
	dst = appendPin(appendStr(dst, "pin"), &wk.Pin)
	if wk.Conversation != "" {
		dst = appendKeyStr(dst, "conversation", wk.Conversation)
	}
	if wk.SessionID != "" {
		dst = appendKeyStr(dst, "session_id", wk.SessionID)
	}
	dst = appendInt(appendStr(dst, "deadline"), wk.Deadline)
	dst = appendStr(dst, "policy")
	if wk.Policy.StallAfterMS != 0 {
		dst = appendMapHeader(dst, 2)
	} else {
		dst = appendMapHeader(dst, 1)
	}
	dst = appendInt(appendStr(dst, "max_attempts"), int64(wk.Policy.MaxAttempts))
	if wk.Policy.StallAfterMS != 0 {
		dst = appendInt(appendStr(dst, "stall_after_ms"), wk.Policy.StallAfterMS)
	}
	if h := wk.Handoff; h != nil {
		dst = appendMapHeader(appendStr(dst, "handoff"), 4)
		if dst, err = AppendRunRecord(appendStr(dst, "record"), &h.Record); err != nil {
			return dst[:start], err
		}
		dst = appendUint(appendStr(dst, "rev"), h.Rev)
		dst = appendUint(appendStr(dst, "seq"), h.Seq)
		dst = appendUint(appendStr(dst, "stream_seq"), h.StreamSeq)
	}
	if len(wk.Fallback) > 0 {
		if dst, err = appendValue(appendStr(dst, "fallback"), wk.Fallback); err != nil {
			return dst[:start], err
		}
	}
	if wk.Workspace != nil {
		if dst, err = appendValue(appendStr(dst, "workspace"), wk.Workspace); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

func appendPin(dst []byte, p *Pin) []byte {
	if len(p.Pricing) > 0 {
		dst = appendMapHeader(dst, 5)
	} else {
		dst = appendMapHeader(dst, 4)
	}
	dst = appendKeyStr(dst, "provider", p.Provider)
	dst = appendKeyStr(dst, "model", p.Model)
	dst = appendKeyStr(dst, "profile_hash", p.ProfileHash)
	dst = appendKeyStr(dst, "registry_version", p.RegistryVersion)
	if len(p.Pricing) > 0 {
		dst = appendStringMap(appendStr(dst, "pricing"), p.Pricing)
	}
	return dst
}

// appendStringMap appends m with its keys in order, as Marshal's encoder
// (SetSortMapKeys) writes a map[string]string.
func appendStringMap(dst []byte, m map[string]string) []byte {
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = appendMapHeader(dst, len(keys))
	for _, k := range keys {
		dst = appendKeyStr(dst, k, m[k])
	}
	return dst
}
