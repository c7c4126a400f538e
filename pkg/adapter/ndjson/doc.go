// Package ndjson frames and reads a stream of JSON objects, newline-delimited
// or directly concatenated, as CLIs and streaming HTTP APIs write them.
// Decoder finds where each object ends without decoding it; DecodeObject
// decodes one into a map; Lexer reads one in place into a parser's own
// fields, exactly as encoding/json would or not at all. Every error is the
// one encoding/json gives for the same bytes.
package ndjson
