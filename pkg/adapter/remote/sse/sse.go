// Package sse reads a text/event-stream (Server-Sent Events) response body
// into events, as the streaming model APIs send them.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxEventSize bounds one event's data.
const MaxEventSize = 16 << 20

// ErrTooLarge is returned for an event over MaxEventSize.
var ErrTooLarge = errors.New("server-sent event too large")

// Event is one dispatched event.
type Event struct {
	// Event is the event field ("message" when absent).
	Event string
	// Data is the data fields joined by newlines.
	Data []byte
	// ID is the last event id seen.
	ID string
}

// Reader reads events. It is not safe for concurrent use.
type Reader struct {
	br   *bufio.Reader
	id   string
	data bytes.Buffer
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next event with data. It returns io.EOF at a clean end
// of the stream (a final event without its blank line is still
// dispatched), io.ErrUnexpectedEOF when the stream ends inside an event
// with no data, and ErrTooLarge for an oversized event.
func (r *Reader) Next() (Event, error) {
	r.data.Reset()
	name := ""
	hasData := false
	for {
		line, err := r.readLine()
		if err == io.EOF {
			if hasData {
				return r.event(name), nil
			}
			return Event{}, io.EOF
		}
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 { // dispatch
			if hasData {
				return r.event(name), nil
			}
			name = ""
			continue
		}
		if line[0] == ':' { // comment
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if hasData {
				r.data.WriteByte('\n')
			}
			if r.data.Len()+len(value) > MaxEventSize {
				return Event{}, fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxEventSize)
			}
			r.data.Write(value)
			hasData = true
		case "id":
			if !bytes.ContainsRune(value, 0) {
				r.id = string(value)
			}
		}
	}
}

func (r *Reader) event(name string) Event {
	if name == "" {
		name = "message"
	}
	return Event{Event: name, Data: bytes.Clone(r.data.Bytes()), ID: r.id}
}

// readLine returns one line without its CR, LF or CRLF ending.
func (r *Reader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > MaxEventSize {
				return nil, fmt.Errorf("%w: a line over %d bytes", ErrTooLarge, MaxEventSize)
			}
			continue
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, nil
	}
}
