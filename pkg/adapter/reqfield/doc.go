// Package reqfield provides the strict decoding of an adapter's typed
// request: a msgpack map read field by field through typed getters that
// record every problem (a wrong type, a value out of range, a NUL byte bound
// for argv, a missing required field, an unknown field) and report them all
// in one wire.AgenticRequestValidationError.
//
// An adapter reads each of its fields once, adds its own rules with Bad and
// BadElem, and Read (Decode, then Err) returns the request or one error:
//
//	func Decode(b []byte) (Request, error) { return reqfield.Read(Name, b, read) }
//
//	func read(d *reqfield.Decoder) Request {
//		d.Require("prompt")
//		req := Request{Prompt: d.Arg("prompt"), Tools: d.Args("tools")}
//		if strings.HasPrefix(req.Prompt, "-") {
//			d.Bad("prompt", "must not begin with %q", "-")
//		}
//		return req
//	}
//
// A nil value is the same as an absent field, as in a struct decode. A
// getter returns its type's zero value for an absent field and for a value
// it found a problem with. Messages name the field as `field "k": …` (or
// `field "k"[i]: …` for an element of a list) and are sorted by field, so
// the same request always gives the same message.
package reqfield
